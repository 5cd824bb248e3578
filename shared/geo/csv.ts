import { readFileSync } from 'node:fs';

/**
 * Parses RFC 4180 CSV (quoted fields with doubled quotes, commas and newlines inside quotes,
 * CRLF or LF). Returns rows of fields; a trailing empty line is dropped.
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        field += c;
      }
      i += 1;
      continue;
    }
    if (c === '"' && field === '') {
      quoted = true;
    } else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      if (c === '\r' && text[i + 1] === '\n') i += 1;
    } else {
      field += c;
    }
    i += 1;
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/** Reads a CSV file with a header row into objects keyed by the header names. */
export function readCsvRecords(path: string): Array<Record<string, string>> {
  const text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
  const [header, ...rows] = parseCsv(text);
  if (!header) return [];
  return rows
    .filter((r) => r.length > 1 || (r[0] ?? '') !== '')
    .map((r) => {
      const rec: Record<string, string> = {};
      header.forEach((h, idx) => {
        rec[h] = r[idx] ?? '';
      });
      return rec;
    });
}
