/**
 * The form in which a listed value is compared however a caller types it: lower case, without
 * spaces, hyphens or underscores ("MPV", "6 Seater", "6_seater", "Cash to driver"). Used by the
 * validator's `x-any-case` enums (shared/schemas/common.ts) and by `parseVehicleType`.
 */
export const anyCaseKey = (s: string): string =>
  s
    .trim()
    .toLowerCase()
    .replace(/[\s_-]+/g, '');
