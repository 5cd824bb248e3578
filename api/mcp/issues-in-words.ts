/**
 * The MCP SDK describes a request that fails its schema with the schema library's issue list as
 * JSON (`[{"expected": "string", "code": "invalid_type", "path": ["client_id"], ...}]`), a dump
 * no OAuth client or person reads. Such a description in words ("client_id: Invalid input:
 * expected string, received undefined."); null for any other description (left as it is).
 */
export function issuesInWords(description: string): string | null {
  if (!description.startsWith('[')) return null;
  try {
    const issues = JSON.parse(description) as unknown;
    if (!Array.isArray(issues) || issues.length === 0) return null;
    const said = issues.map((i: { path?: unknown; message?: unknown }) => {
      const path = Array.isArray(i.path) && i.path.length > 0 ? i.path.join('.') : 'request body';
      return `${path}: ${typeof i.message === 'string' ? i.message : 'is not valid'}`;
    });
    return `${said.join('; ')}.`;
  } catch {
    return null;
  }
}
