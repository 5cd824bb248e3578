/**
 * A stored place as people read it: its name, and for a station the word "station" when its
 * name lacks it. The rail data names Leeds's station "Leeds" and York's "York", so a job card,
 * the passenger's e-mail and the booking and tracking pages said "Leeds", read as anywhere in
 * the city. The API's structured places keep the data's name beside their `kind`.
 */
export function placeLabel(place: { name?: string | null; kind?: string | null }): string {
  const name = (place.name ?? '').trim();
  if (place.kind !== 'station' || name === '' || /\bstation$/i.test(name)) return name;
  return `${name} station`;
}
