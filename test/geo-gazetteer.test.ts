import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createGazetteer, DEFAULT_DATA_DIR, defaultGazetteer } from '../shared/geo/gazetteer.ts';
import { haversineMeters } from '../shared/geo/route-estimate.ts';
import type { Place, PlaceKind } from '../shared/geo/types.ts';

const gazetteer = createGazetteer();

/**
 * `q` resolves to a place of `kind` named `name` (in `council`, when given) within `km` of `at`,
 * a real-world point (not read from our data files).
 */
async function expectPlace(
  q: string,
  want: { kind: string; name: string; council?: string },
  at: readonly [number, number],
  km: number,
  opts: { worldwide?: boolean } = {},
): Promise<void> {
  const r = await gazetteer.geocode(q, opts);
  const council = want.council === undefined ? {} : { council: r.ok ? r.place.localAuthorityCode : undefined };
  expect(r.ok && { kind: r.place.kind, name: r.place.name, ...council }, q).toEqual(want);
  if (r.ok) expect(haversineMeters(r.place, { lat: at[0], lng: at[1] }) / 1000, q).toBeLessThan(km);
}

interface Golden {
  q: string;
  kind: PlaceKind;
  /** Exact display name, or a pattern for it. */
  name: string | RegExp;
  /** The real-world location (not read from our data files), and how far off we may be. */
  at: readonly [number, number];
  km: number;
  extra?: Partial<Place>;
}

const g = (
  q: string,
  kind: PlaceKind,
  name: string | RegExp,
  at: readonly [number, number],
  km: number,
  extra?: Partial<Place>,
): Golden => (extra ? { q, kind, name, at, km, extra } : { q, kind, name, at, km });

// Known locations (WGS84), rounded; tolerances: stations and terminals 1 km, airports 3 km,
// postcodes 3 km (we only have district centroids), towns 5 km, addresses as stated.
const KINGS_CROSS = [51.5308, -0.1238] as const;
const EUSTON = [51.5282, -0.1337] as const;
const PICCADILLY = [53.4774, -2.2309] as const;
const HEATHROW = [51.47, -0.4543] as const;
const GATWICK = [51.1537, -0.1821] as const;
const GATWICK_NORTH = [51.162, -0.1772] as const;
const GATWICK_SOUTH = [51.1564, -0.1609] as const;
const NEWQUAY_AIRPORT = [50.4406, -4.9954] as const;
const BAKER_STREET = [51.5226, -0.1571] as const;
const DOWNING_STREET = [51.5034, -0.1276] as const;

const postcodes: Golden[] = [
  g('SW1A 2AA', 'postcode', 'SW1A 2AA', DOWNING_STREET, 3, {
    localAuthorityCode: 'E09000033',
    postcodeDistrict: 'SW1A',
  }),
  g('sw1a2aa', 'postcode', 'SW1A 2AA', DOWNING_STREET, 3, { postcodeDistrict: 'SW1A' }),
  g('  sw1a   2aa ', 'postcode', 'SW1A 2AA', DOWNING_STREET, 3),
  g('SW1A2AA', 'postcode', 'SW1A 2AA', DOWNING_STREET, 3),
  g('M1 1AE', 'postcode', 'M1 1AE', [53.478, -2.236], 3, { localAuthorityCode: 'E08000003', postcodeDistrict: 'M1' }),
  g('m11ae', 'postcode', 'M1 1AE', [53.478, -2.236], 3),
  g('EH1 1YZ', 'postcode', 'EH1 1YZ', [55.95, -3.19], 3, { localAuthorityCode: 'S12000036' }),
  g('G2 1DY', 'postcode', 'G2 1DY', [55.861, -4.258], 3, { localAuthorityCode: 'S12000049' }),
  g('CF10 1EP', 'postcode', 'CF10 1EP', [51.478, -3.177], 3, { localAuthorityCode: 'W06000015' }),
  g('B1 1BB', 'postcode', 'B1 1BB', [52.478, -1.908], 3, { localAuthorityCode: 'E08000025' }),
  g('LS1 4DY', 'postcode', 'LS1 4DY', [53.797, -1.549], 3, { localAuthorityCode: 'E08000035' }),
  g('BS1 4DJ', 'postcode', 'BS1 4DJ', [51.452, -2.594], 3, { localAuthorityCode: 'E06000023' }),
  g('NE1 7RU', 'postcode', 'NE1 7RU', [54.972, -1.613], 3, { localAuthorityCode: 'E08000021' }),
  g('L1 8JQ', 'postcode', 'L1 8JQ', [53.404, -2.98], 3, { localAuthorityCode: 'E08000012' }),
  g('TW6 1EW', 'postcode', 'TW6 1EW', HEATHROW, 3, { localAuthorityCode: 'E09000017', postcodeDistrict: 'TW6' }),
  g('BT1 5GS', 'postcode', 'BT1 5GS', [54.597, -5.93], 3, { localAuthorityCode: null, countryCode: 'GB' }),
  g('AB10 1XG', 'postcode', 'AB10 1XG', [57.145, -2.1], 3, { localAuthorityCode: 'S12000033' }),
  g('cb2 1tn', 'postcode', 'CB2 1TN', [52.2, 0.12], 3),
  g('OX1 2JD', 'postcode', 'OX1 2JD', [51.752, -1.258], 3, { localAuthorityCode: 'E07000178' }),
  g('YO1 7HH', 'postcode', 'YO1 7HH', [53.96, -1.082], 3, { localAuthorityCode: 'E06000014' }),
  // W1A is a large-user district whose units sit at a sorting office in Islington.
  g('W1A 1AA', 'postcode', 'W1A 1AA', [51.5188, -0.1439], 3, { localAuthorityCode: 'E09000019' }),
  g('e1 6an', 'postcode', 'E1 6AN', [51.517, -0.065], 3, { localAuthorityCode: 'E09000030' }),
  g('PL1 2AA', 'postcode', 'PL1 2AA', [50.37, -4.14], 3),
  g('SA1 1NW', 'postcode', 'SA1 1NW', [51.62, -3.94], 3, { localAuthorityCode: 'W06000011' }),
  g('NR1 1AA', 'postcode', 'NR1 1AA', [52.63, 1.3], 3),
  // Outward codes alone.
  g('M1', 'postcode', 'M1', [53.478, -2.236], 3, { localAuthorityCode: 'E08000003', postcodeDistrict: 'M1' }),
  g('EH1', 'postcode', 'EH1', [55.951, -3.19], 3, { localAuthorityCode: 'S12000036' }),
  g('sw1a', 'postcode', 'SW1A', [51.503, -0.135], 3, { postcodeDistrict: 'SW1A' }),
  g('B1', 'postcode', 'B1', [52.478, -1.905], 3, { localAuthorityCode: 'E08000025' }),
  g('ls1', 'postcode', 'LS1', [53.797, -1.549], 3),
  g('G1', 'postcode', 'G1', [55.859, -4.246], 3, { localAuthorityCode: 'S12000049' }),
  g('CF10', 'postcode', 'CF10', [51.473, -3.175], 3),
  g('W1', 'postcode', 'W1', [51.515, -0.145], 3, { localAuthorityCode: 'E09000033' }),
  g('EC1', 'postcode', 'EC1', [51.523, -0.1], 3),
  g('BT7', 'postcode', 'BT7', [54.58, -5.92], 3, { localAuthorityCode: null }),
  g('TW6', 'postcode', 'TW6', HEATHROW, 3, { localAuthorityCode: 'E09000017' }),
  g('E14', 'postcode', 'E14', [51.505, -0.02], 3, { localAuthorityCode: 'E09000030' }),
];

const stations: Golden[] = [
  g('Manchester Piccadilly', 'station', 'Manchester Piccadilly', PICCADILLY, 1, { localAuthorityCode: 'E08000003' }),
  g('MAN', 'station', 'Manchester Piccadilly', PICCADILLY, 1),
  g('Manchester Piccadilly station', 'station', 'Manchester Piccadilly', PICCADILLY, 1),
  g('Manchester station', 'station', 'Manchester Piccadilly', PICCADILLY, 1),
  g('KGX', 'station', 'London Kings Cross', KINGS_CROSS, 1, { localAuthorityCode: 'E09000007' }),
  g('kings cross', 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g("King's Cross", 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g('London Kings Cross', 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g("London King's Cross railway station", 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g('Kings Cross St Pancras', 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g('Euston station', 'station', 'London Euston', EUSTON, 1, { localAuthorityCode: 'E09000007' }),
  g('Euston', 'station', 'London Euston', EUSTON, 1),
  g('EUS', 'station', 'London Euston', EUSTON, 1),
  g('London Paddington', 'station', 'London Paddington', [51.5154, -0.1755], 1),
  g('Paddington station', 'station', 'London Paddington', [51.5154, -0.1755], 1),
  g('PAD', 'station', 'London Paddington', [51.5154, -0.1755], 1),
  g('Victoria station', 'station', 'London Victoria', [51.4952, -0.1441], 1),
  g('Waterloo', 'station', 'London Waterloo', [51.5031, -0.1132], 1),
  g('Liverpool Street', 'station', 'London Liverpool Street', [51.5178, -0.0823], 1),
  g('London Bridge', 'station', 'London Bridge', [51.505, -0.086], 1),
  g('St Pancras', 'station', 'London St Pancras International', [51.5319, -0.1263], 1),
  g('Marylebone', 'station', 'London Marylebone', [51.5225, -0.1631], 1),
  g('Birmingham New Street', 'station', 'Birmingham New Street', [52.4778, -1.899], 1, {
    localAuthorityCode: 'E08000025',
  }),
  g('BHM', 'station', 'Birmingham New Street', [52.4778, -1.899], 1),
  g('New Street station', 'station', 'Birmingham New Street', [52.4778, -1.899], 1),
  g('Leeds station', 'station', 'Leeds', [53.795, -1.5475], 1, { localAuthorityCode: 'E08000035' }),
  g('Glasgow Central', 'station', 'Glasgow Central', [55.859, -4.258], 1, { localAuthorityCode: 'S12000049' }),
  g('GLC', 'station', 'Glasgow Central', [55.859, -4.258], 1),
  g('Glasgow Queen Street', 'station', 'Glasgow Queen Street', [55.8622, -4.2511], 1),
  g('Edinburgh Waverley', 'station', 'Edinburgh Waverley', [55.952, -3.189], 1, { localAuthorityCode: 'S12000036' }),
  g('Waverley', 'station', 'Edinburgh Waverley', [55.952, -3.189], 1),
  g('Cardiff Central', 'station', 'Cardiff Central', [51.476, -3.179], 1, { localAuthorityCode: 'W06000015' }),
  g('CDF', 'station', 'Cardiff Central', [51.476, -3.179], 1),
  g('Bristol Temple Meads', 'station', 'Bristol Temple Meads', [51.4491, -2.5813], 1, {
    localAuthorityCode: 'E06000023',
  }),
  g('Temple Meads', 'station', 'Bristol Temple Meads', [51.4491, -2.5813], 1),
  g('Liverpool Lime Street', 'station', 'Liverpool Lime Street', [53.4075, -2.977], 1, {
    localAuthorityCode: 'E08000012',
  }),
  g('York station', 'station', 'York', [53.958, -1.093], 1),
  g('Newcastle station', 'station', 'Newcastle', [54.9683, -1.6174], 1),
  g('Manchester Victoria', 'station', 'Manchester Victoria', [53.4875, -2.2425], 1),
  g('Manchester Oxford Road', 'station', 'Manchester Oxford Road', [53.474, -2.242], 1),
  g('Manchester Airport station', 'station', 'Manchester Airport', [53.365, -2.273], 1.5),
  g('Gatwick Airport station', 'station', 'Gatwick Airport', [51.1565, -0.161], 1),
  g('Stratford (London)', 'station', 'Stratford (London)', [51.5416, -0.0034], 1, { localAuthorityCode: 'E09000025' }),
  g('Stratford station', 'station', /^Stratford/, [51.5416, -0.0034], 1),
  g('Clapham Junction', 'station', 'Clapham Junction', [51.4642, -0.1704], 1),
  g('Reading station', 'station', 'Reading', [51.4588, -0.9718], 1),
  g('Milton Keynes Central', 'station', 'Milton Keynes Central', [52.0343, -0.7741], 1),
  g('Brighton station', 'station', 'Brighton', [50.829, -0.1413], 1),
  g('Oxford station', 'station', 'Oxford', [51.7535, -1.27], 1),
  g('Cambridge station', 'station', 'Cambridge', [52.1943, 0.1373], 1),
  g('Sheffield rail station', 'station', 'Sheffield', [53.3781, -1.462], 1),
  g('Southampton Central', 'station', 'Southampton Central', [50.9075, -1.4139], 1),
  g('SOU', 'station', 'Southampton Central', [50.9075, -1.4139], 1),
  g('Exeter St Davids', 'station', 'Exeter St Davids', [50.7292, -3.5434], 1),
  g('Preston station', 'station', 'Preston', [53.7565, -2.7075], 1),
  g('Stirling station', 'station', 'Stirling', [56.1196, -3.9355], 1),
  g('Perth station', 'station', 'Perth', [56.3918, -3.4396], 1),
  g('Newquay station', 'station', 'Newquay', [50.4152, -5.0758], 1),
  g('Newport station', 'station', 'Newport (South Wales)', [51.5887, -3.0001], 1, { localAuthorityCode: 'W06000022' }),
  g('Heathrow Terminal 5 station', 'station', 'Heathrow Terminal 5', [51.4723, -0.488], 1, {
    localAuthorityCode: 'E09000017',
  }),
  // TfL.
  g('Oxford Circus', 'station', 'Oxford Circus', [51.5152, -0.1419], 1, { localAuthorityCode: 'E09000033' }),
  g('Canary Wharf', 'station', 'Canary Wharf', [51.5054, -0.0195], 1, { localAuthorityCode: 'E09000030' }),
  g('Bank', 'station', 'Bank', [51.5133, -0.0886], 1),
  g('Baker Street station', 'station', 'Baker Street', BAKER_STREET, 1),
  g('Piccadilly Circus', 'station', 'Piccadilly Circus', [51.5098, -0.1342], 1),
  g('Tottenham Court Road', 'station', 'Tottenham Court Road', [51.5165, -0.131], 1),
  g('Covent Garden', 'station', 'Covent Garden', [51.5129, -0.1243], 1),
  g('Westminster station', 'station', 'Westminster', [51.501, -0.1254], 1),
  g("Shepherd's Bush", 'station', 'Shepherds Bush', [51.5046, -0.2187], 1),
  g('Canada Water', 'station', 'Canada Water', [51.4982, -0.0502], 1),
  g('Brixton tube', 'station', 'Brixton', [51.4627, -0.1145], 1),
  g('Seven Sisters', 'station', 'Seven Sisters', [51.5822, -0.0749], 1),
  g('Five Ways station', 'station', 'Five Ways', [52.4711, -1.9124], 1),
  g('Battersea Power Station', 'station', 'Battersea Power Station', [51.4799, -0.1421], 1),
];

const airport = (iata: string, extra?: Partial<Place>): Partial<Place> => ({ iata, countryCode: 'GB', ...extra });

const airports: Golden[] = [
  g('Heathrow', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR', { localAuthorityCode: 'E09000017' })),
  g('Heathrow Airport', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g('London Heathrow', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g('LHR', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g('lhr', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g(
    'Heathrow T5',
    'airport',
    'London Heathrow Airport, Terminal 5',
    [51.4715, -0.488],
    1,
    airport('LHR', { terminal: 'T5', localAuthorityCode: 'E09000017' }),
  ),
  g(
    'Heathrow Terminal 2',
    'airport',
    'London Heathrow Airport, Terminal 2',
    [51.4697, -0.4513],
    1,
    airport('LHR', { terminal: 'T2' }),
  ),
  g('Heathrow Terminal 3', 'airport', /Terminal 3$/, [51.4712, -0.4569], 1, airport('LHR', { terminal: 'T3' })),
  g('heathrow terminal five', 'airport', /Terminal 5$/, [51.4715, -0.488], 1, airport('LHR', { terminal: 'T5' })),
  g('LHR T4', 'airport', /Terminal 4$/, [51.4584, -0.446], 1, airport('LHR', { terminal: 'T4' })),
  g('Heathrow, Terminal 5', 'airport', /Terminal 5$/, [51.4715, -0.488], 1, airport('LHR', { terminal: 'T5' })),
  // An airport named after its city, with a terminal: the airport (the city was once taken, 14 km off).
  g('Manchester Airport T2', 'airport', /Terminal 2$/, [53.3537, -2.275], 1, airport('MAN', { terminal: 'T2' })),
  g(
    'Manchester Airport Terminal 1',
    'airport',
    /Terminal 1$/,
    [53.3537, -2.275],
    2,
    airport('MAN', { terminal: 'T1' }),
  ),
  g('Newcastle Central', 'station', 'Newcastle', [54.9683, -1.6174], 1),
  g('Prestwick International Airport', 'station', 'Prestwick International Airport', [55.5091, -4.6143], 1),
  // Where at the airport, or "international" beside "airport": still the airport, not its city.
  g('Manchester Airport Arrivals', 'airport', 'Manchester Airport', [53.3537, -2.275], 3, airport('MAN')),
  g('Edinburgh Airport departures', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 3, airport('EDI')),
  g('Leeds Bradford International Airport', 'airport', 'Leeds Bradford Airport', [53.8659, -1.6606], 3, airport('LBA')),
  // "terminal" with no number: the airport, not an airport abroad in a town of the same name.
  g('Glasgow Airport terminal', 'airport', 'Glasgow International Airport', [55.8719, -4.4331], 3, airport('GLA')),
  g('Gatwick', 'airport', 'London Gatwick Airport', GATWICK, 3, airport('LGW')),
  g('lgw', 'airport', 'London Gatwick Airport', GATWICK, 3, airport('LGW')),
  g(
    'Gatwick North Terminal',
    'airport',
    'London Gatwick Airport, North Terminal',
    [51.162, -0.1772],
    1,
    airport('LGW', { terminal: 'North' }),
  ),
  g(
    'Gatwick South Terminal',
    'airport',
    'London Gatwick Airport, South Terminal',
    [51.1564, -0.1609],
    1,
    airport('LGW', { terminal: 'South' }),
  ),
  g(
    'Gatwick (North Terminal)',
    'airport',
    /North Terminal$/,
    [51.162, -0.1772],
    1,
    airport('LGW', { terminal: 'North' }),
  ),
  // "Gatwick North" / "Gatwick South" without "terminal", as passengers say it: the terminal,
  // read only right after Gatwick's name or code (see the negative cases below).
  g(
    'Gatwick North',
    'airport',
    'London Gatwick Airport, North Terminal',
    GATWICK_NORTH,
    1,
    airport('LGW', { terminal: 'North' }),
  ),
  g(
    'Gatwick South',
    'airport',
    'London Gatwick Airport, South Terminal',
    GATWICK_SOUTH,
    1,
    airport('LGW', { terminal: 'South' }),
  ),
  g('Gatwick North arrivals', 'airport', /North Terminal$/, GATWICK_NORTH, 1, airport('LGW', { terminal: 'North' })),
  g('Gatwick South departures', 'airport', /South Terminal$/, GATWICK_SOUTH, 1, airport('LGW', { terminal: 'South' })),
  g('LGW South', 'airport', /South Terminal$/, GATWICK_SOUTH, 1, airport('LGW', { terminal: 'South' })),
  g('lgw north', 'airport', /North Terminal$/, GATWICK_NORTH, 1, airport('LGW', { terminal: 'North' })),
  g('London Gatwick North', 'airport', /North Terminal$/, GATWICK_NORTH, 1, airport('LGW', { terminal: 'North' })),
  g('Gatwick Airport South', 'airport', /South Terminal$/, GATWICK_SOUTH, 1, airport('LGW', { terminal: 'South' })),
  g('Gatwick (South)', 'airport', /South Terminal$/, GATWICK_SOUTH, 1, airport('LGW', { terminal: 'South' })),
  g('Stansted', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3, airport('STN')),
  g('STN', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3, airport('STN')),
  g('STN airport', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3, airport('STN')),
  g('Luton', 'airport', 'London Luton Airport', [51.8747, -0.3683], 3, airport('LTN')),
  g('Luton Airport', 'airport', 'London Luton Airport', [51.8747, -0.3683], 3, airport('LTN')),
  g(
    'London City',
    'airport',
    'London City Airport',
    [51.5048, 0.0495],
    3,
    airport('LCY', { localAuthorityCode: 'E09000025' }),
  ),
  g('London City Airport', 'airport', 'London City Airport', [51.5048, 0.0495], 3, airport('LCY')),
  g('Southend Airport', 'airport', /Southend Airport/, [51.5703, 0.6933], 3, airport('SEN')),
  g(
    'Manchester Airport',
    'airport',
    'Manchester Airport',
    [53.365, -2.2728],
    3,
    airport('MAN', { localAuthorityCode: 'E08000003' }),
  ),
  g('MAN airport', 'airport', 'Manchester Airport', [53.365, -2.2728], 3, airport('MAN')),
  g(
    'Edinburgh Airport',
    'airport',
    'Edinburgh Airport',
    [55.95, -3.3725],
    3,
    airport('EDI', { localAuthorityCode: 'S12000036' }),
  ),
  g('EDI', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 3, airport('EDI')),
  g(
    'Glasgow Airport',
    'airport',
    /Glasgow International/,
    [55.8719, -4.4331],
    3,
    airport('GLA', { localAuthorityCode: 'S12000038' }),
  ),
  g(
    'Birmingham Airport',
    'airport',
    'Birmingham International Airport',
    [52.4539, -1.748],
    3,
    airport('BHX', { localAuthorityCode: 'E08000029' }),
  ),
  g('Bristol Airport', 'airport', 'Bristol Airport', [51.3827, -2.7191], 3, airport('BRS')),
  g('Newcastle Airport', 'airport', 'Newcastle Airport', [55.0375, -1.6917], 3, airport('NCL')),
  g('Liverpool John Lennon Airport', 'airport', 'Liverpool John Lennon Airport', [53.3336, -2.8497], 3, airport('LPL')),
  g('John Lennon Airport', 'airport', 'Liverpool John Lennon Airport', [53.3336, -2.8497], 3, airport('LPL')),
  g('East Midlands Airport', 'airport', 'East Midlands Airport', [52.8311, -1.3281], 3, airport('EMA')),
  g('Leeds Bradford Airport', 'airport', 'Leeds Bradford Airport', [53.8659, -1.6606], 3, airport('LBA')),
  g(
    'Belfast International Airport',
    'airport',
    'Belfast International Airport',
    [54.6575, -6.2158],
    3,
    airport('BFS', { localAuthorityCode: null }),
  ),
  g(
    'George Best Belfast City Airport',
    'airport',
    'George Best Belfast City Airport',
    [54.6181, -5.8725],
    3,
    airport('BHD'),
  ),
  g('Aberdeen Airport', 'airport', /Aberdeen/, [57.2019, -2.1978], 3, airport('ABZ')),
  g('Cardiff Airport', 'airport', 'Cardiff International Airport', [51.3967, -3.3433], 3, airport('CWL')),
  g('Inverness Airport', 'airport', 'Inverness Airport', [57.5425, -4.0475], 3, airport('INV')),
  g('Prestwick Airport', 'airport', 'Glasgow Prestwick Airport', [55.5094, -4.5867], 3, airport('PIK')),
  // "<town> Airport", with or without where at the airport, for a town the airport's name
  // names, though the data's city is another or misspelt ("Newquai"): once the town itself.
  g('Newquay Airport', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Newquay Airport arrivals', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Newquay Airport departures', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Arrivals, Newquay Airport', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Cornwall Airport Newquay', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Cornwall Airport', 'airport', 'Newquay Cornwall Airport', NEWQUAY_AIRPORT, 3, airport('NQY')),
  g('Derry Airport arrivals', 'airport', 'City of Derry Airport', [55.0428, -7.1611], 3, airport('LDY')),
  g('Dyce Airport', 'airport', 'Aberdeen Dyce Airport', [57.2019, -2.1978], 3, airport('ABZ')),
  g('Bradford Airport', 'airport', 'Leeds Bradford Airport', [53.8659, -1.6606], 3, airport('LBA')),
  g('Kidlington Airport', 'airport', 'Oxford (Kidlington) Airport', [51.8369, -1.32], 3, airport('OXF')),
  g('Bristol Airport arrivals', 'airport', 'Bristol Airport', [51.3827, -2.7191], 3, airport('BRS')),
  g('Exeter Airport departures', 'airport', 'Exeter International Airport', [50.7344, -3.4139], 3, airport('EXT')),
  g('Inverness Airport arrivals', 'airport', 'Inverness Airport', [57.5425, -4.0475], 3, airport('INV')),
  g('Aberdeen Airport departures', 'airport', 'Aberdeen Dyce Airport', [57.2019, -2.1978], 3, airport('ABZ')),
  g('Southampton Airport arrivals', 'airport', 'Southampton Airport', [50.9503, -1.3568], 3, airport('SOU')),
  g('Luton Airport departures', 'airport', 'London Luton Airport', [51.8747, -0.3683], 3, airport('LTN')),
  g('Stansted Airport arrivals', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3, airport('STN')),
];

const towns: Golden[] = [
  g('Leeds', 'place', 'Leeds', [53.7997, -1.5492], 5, { localAuthorityCode: 'E08000035', countryCode: 'GB' }),
  g('Birmingham', 'place', 'Birmingham', [52.4862, -1.8904], 5, { localAuthorityCode: 'E08000025' }),
  g('Manchester', 'place', 'Manchester', [53.4808, -2.2426], 5, { localAuthorityCode: 'E08000003' }),
  g('London', 'place', 'London', [51.5074, -0.1278], 5),
  g('St Albans', 'place', 'St Albans', [51.752, -0.336], 5, { localAuthorityCode: 'E07000240' }),
  g('Saint Albans', 'place', 'St Albans', [51.752, -0.336], 5),
  g('st. albans', 'place', 'St Albans', [51.752, -0.336], 5),
  g('Stratford-upon-Avon', 'place', 'Stratford-upon-Avon', [52.1917, -1.7073], 5, { localAuthorityCode: 'E07000221' }),
  g('Stratford upon Avon', 'place', 'Stratford-upon-Avon', [52.1917, -1.7073], 5),
  g('Newport, Wales', 'place', 'Newport', [51.5842, -2.9977], 5, { localAuthorityCode: 'W06000022' }),
  g('Newport, Isle of Wight', 'place', 'Newport', [50.701, -1.2883], 5, { localAuthorityCode: 'E06000046' }),
  g('Newport', 'place', 'Newport', [51.5842, -2.9977], 5, { localAuthorityCode: 'W06000022' }),
  g('Newport (Shropshire)', 'place', 'Newport', [52.769, -2.378], 5, { localAuthorityCode: 'E06000020' }),
  g('Newport, Telford', 'place', 'Newport', [52.769, -2.378], 5),
  g('Newport, Essex', 'place', 'Newport', [51.984, 0.214], 5),
  g('Richmond, North Yorkshire', 'place', 'Richmond', [54.403, -1.737], 5),
  g('Edinburgh', 'place', 'Edinburgh', [55.9533, -3.1883], 5, { localAuthorityCode: 'S12000036' }),
  g('Glasgow', 'place', 'Glasgow', [55.8642, -4.2518], 5, { localAuthorityCode: 'S12000049' }),
  g('Cardiff', 'place', 'Cardiff', [51.4816, -3.1791], 5, { localAuthorityCode: 'W06000015' }),
  g('Belfast', 'place', 'Belfast', [54.5973, -5.9301], 5, { localAuthorityCode: null, countryCode: 'GB' }),
  g('Derry', 'place', 'Derry', [54.9966, -7.3086], 5),
  g('Londonderry', 'place', 'Derry', [54.9966, -7.3086], 5),
  g('Aberdeen', 'place', 'Aberdeen', [57.1497, -2.0943], 5),
  g('Inverness', 'place', 'Inverness', [57.4778, -4.2247], 5),
  g('Hull', 'place', 'Kingston upon Hull', [53.7676, -0.3274], 5),
  g('Newcastle', 'place', 'Newcastle upon Tyne', [54.9783, -1.6178], 5),
  g('York', 'place', 'York', [53.96, -1.0873], 5),
  g('Bath', 'place', 'Bath', [51.3811, -2.359], 5),
  g('Oxford', 'place', 'Oxford', [51.752, -1.2577], 5),
  g('Cambridge', 'place', 'Cambridge', [52.2053, 0.1218], 5),
  g('Brighton', 'place', 'Brighton', [50.8225, -0.1372], 5),
  g('Milton Keynes', 'place', 'Milton Keynes', [52.0406, -0.7594], 5),
  g('Luton town centre', 'place', 'Luton', [51.8787, -0.42], 5),
  g('Manchester city centre', 'place', 'Manchester', [53.4808, -2.2426], 5),
  g('Westminster', 'place', 'City of Westminster', [51.4975, -0.1357], 5),
  g('Harrogate', 'place', 'Harrogate', [53.9921, -1.5418], 5),
  g('Swansea', 'place', 'Swansea', [51.6214, -3.9436], 5),
  g('Stoke', 'place', 'Stoke-on-Trent', [53.0027, -2.1794], 5),
  g('Southend', 'place', 'Southend-on-Sea', [51.5459, 0.7077], 5),
  g('Camden Town', 'place', 'Camden Town', [51.539, -0.1426], 5),
  g('Kingston', 'place', 'Kingston upon Thames', [51.4123, -0.3007], 5),
  g('Ely', 'place', 'Ely', [52.399, 0.262], 5),
  g('Leeds, UK', 'place', 'Leeds', [53.7997, -1.5492], 5),
  g('Manchester, England', 'place', 'Manchester', [53.4808, -2.2426], 5),
  g('Edinburgh, Scotland', 'place', 'Edinburgh', [55.9533, -3.1883], 5),
  g('Cardiff, Wales', 'place', 'Cardiff', [51.4816, -3.1791], 5),
  g('St Albans, Herts', 'place', 'St Albans', [51.752, -0.336], 5),
  g('Harpenden, St Albans', 'place', 'Harpenden', [51.8168, -0.3571], 5),
  // Still the towns: no airport words, and North or South not after Gatwick.
  g('Newquay', 'place', 'Newquay', [50.4153, -5.0734], 5),
  g('Bradford', 'place', 'Bradford', [53.7939, -1.7521], 5),
  g('Dyce', 'place', 'Dyce', [57.2052, -2.1768], 5),
  g('North Shields', 'place', 'North Shields', [55.0176, -1.4486], 5),
  g('South Shields', 'place', 'South Shields', [54.9986, -1.4323], 5),
];

const addresses: Golden[] = [
  g('10 Downing Street, London SW1A 2AA', 'address', '10 Downing Street, London SW1A 2AA', DOWNING_STREET, 3, {
    localAuthorityCode: 'E09000033',
    postcodeDistrict: 'SW1A',
  }),
  g('10 downing street london sw1a2aa', 'address', '10 downing street london SW1A 2AA', DOWNING_STREET, 3),
  g('Buckingham Palace, London SW1A 1AA', 'address', 'Buckingham Palace, London SW1A 1AA', [51.5014, -0.1419], 3),
  // M3 straddles the Irwell; most of its units are in Salford, so the district says Salford.
  g(
    'Flat 4, 22 Deansgate, Manchester M3 2BW',
    'address',
    'Flat 4, 22 Deansgate, Manchester M3 2BW',
    [53.48, -2.248],
    3,
    {
      localAuthorityCode: 'E08000006',
      postcodeDistrict: 'M3',
    },
  ),
  g('1 Princes Street, Edinburgh EH2 2EQ', 'address', /Princes Street/, [55.953, -3.19], 3, {
    localAuthorityCode: 'S12000036',
  }),
  g('5 High Street, Oxford OX1 4AA', 'address', /High Street, Oxford OX1 4AA/, [51.752, -1.255], 3, {
    localAuthorityCode: 'E07000178',
  }),
  g('221B Baker Street, London', 'address', '221B Baker Street, London', [51.5238, -0.1586], 1, {
    localAuthorityCode: 'E09000033',
  }),
  g('221b baker street london', 'address', '221b baker street london', [51.5238, -0.1586], 1),
  g('Baker Street, London NW1', 'address', 'Baker Street, London NW1', [51.5238, -0.1586], 1),
  g('10 Downing Street, London', 'address', '10 Downing Street, London', DOWNING_STREET, 3),
  g('Tesco, Leeds', 'address', 'Tesco, Leeds', [53.7997, -1.5492], 5),
  g('Victoria Quarter, Leeds', 'address', 'Victoria Quarter, Leeds', [53.7976, -1.5407], 5),
  g('14 Victoria Road, Leeds', 'address', '14 Victoria Road, Leeds', [53.7997, -1.5492], 5),
  g('12 Station Road, Harpenden', 'address', '12 Station Road, Harpenden', [51.8168, -0.3571], 3),
  g('12 Station Road, Harpenden, St Albans', 'address', /Harpenden/, [51.8168, -0.3571], 3),
  g('1 Canada Square, Canary Wharf, London', 'address', '1 Canada Square, Canary Wharf, London', [51.5049, -0.0195], 1),
  g(
    'Departures, Heathrow Terminal 5',
    'airport',
    /Terminal 5$/,
    [51.4715, -0.488],
    1,
    airport('LHR', { terminal: 'T5' }),
  ),
  g('Arrivals, Gatwick South Terminal', 'airport', /South Terminal$/, [51.1564, -0.1609], 1, airport('LGW')),
  g('Arrivals, Gatwick North', 'airport', /North Terminal$/, GATWICK_NORTH, 1, airport('LGW', { terminal: 'North' })),
  g('Costa Coffee, Euston station', 'station', 'London Euston', EUSTON, 1),
];

const misspelt: Golden[] = [
  g('Manchster Picadilly', 'station', 'Manchester Piccadilly', PICCADILLY, 1, { localAuthorityCode: 'E08000003' }),
  g('Manchester Piccadily station', 'station', 'Manchester Piccadilly', PICCADILLY, 1),
  g('Birmingam', 'place', 'Birmingham', [52.4862, -1.8904], 5),
  g('Brimingham', 'place', 'Birmingham', [52.4862, -1.8904], 5),
  g('Edinbrugh', 'place', 'Edinburgh', [55.9533, -3.1883], 5),
  g('Glasgw', 'place', 'Glasgow', [55.8642, -4.2518], 5),
  g('Nottingam', 'place', 'Nottingham', [52.9548, -1.1581], 5),
  g('Sheffeild', 'place', 'Sheffield', [53.3811, -1.4701], 5),
  g('Liverpol', 'place', 'Liverpool', [53.4084, -2.9916], 5),
  g('Cambrige', 'place', 'Cambridge', [52.2053, 0.1218], 5),
  g('Heathrw', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g('Gatwik', 'airport', 'London Gatwick Airport', GATWICK, 3, airport('LGW')),
  g('Standsted', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3, airport('STN')),
  g('heathrow termnal 5', 'airport', /Terminal 5$/, [51.4715, -0.488], 1, airport('LHR', { terminal: 'T5' })),
  g('Edinburgh Airprot', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 3, airport('EDI')),
  g('Picadilly Circus', 'station', 'Piccadilly Circus', [51.5098, -0.1342], 1),
  g('kings cros', 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g('Oxford Circs', 'station', 'Oxford Circus', [51.5152, -0.1419], 1),
  g('Edinburgh Waverly', 'station', 'Edinburgh Waverley', [55.952, -3.189], 1),
  g('Glasgow Centrl', 'station', 'Glasgow Central', [55.859, -4.258], 1),
  g('Stratford on Avon', 'place', 'Stratford-upon-Avon', [52.1917, -1.7073], 5),
  g('Newcastle upon Tyne', 'place', 'Newcastle upon Tyne', [54.9783, -1.6178], 5),
];

const oddlyTyped: Golden[] = [
  g('  LEEDS  ', 'place', 'Leeds', [53.7997, -1.5492], 5),
  g('leeds!!!', 'place', 'Leeds', [53.7997, -1.5492], 5),
  g('MANCHESTER   PICCADILLY', 'station', 'Manchester Piccadilly', PICCADILLY, 1),
  g('st-albans', 'place', 'St Albans', [51.752, -0.336], 5),
  g('Stratford Upon Avon', 'place', 'Stratford-upon-Avon', [52.1917, -1.7073], 5),
  g('KINGS-CROSS', 'station', 'London Kings Cross', KINGS_CROSS, 1),
  g('LONDON HEATHROW AIRPORT', 'airport', 'London Heathrow Airport', HEATHROW, 3, airport('LHR')),
  g('london-city-airport', 'airport', 'London City Airport', [51.5048, 0.0495], 3, airport('LCY')),
  g('Oxford Circus.', 'station', 'Oxford Circus', [51.5152, -0.1419], 1),
  g('EDINBURGH AIRPORT', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 3, airport('EDI')),
  g('glasgow   central', 'station', 'Glasgow Central', [55.859, -4.258], 1),
  g('Cardiff  Central  Station', 'station', 'Cardiff Central', [51.476, -3.179], 1, {
    localAuthorityCode: 'W06000015',
  }),
  g('"Heathrow T2"', 'airport', /Terminal 2$/, [51.4697, -0.4513], 1, airport('LHR', { terminal: 'T2' })),
];

const golden: Golden[] = [...postcodes, ...stations, ...airports, ...towns, ...addresses, ...misspelt, ...oddlyTyped];

describe('gazetteer golden set', () => {
  it('has at least 150 queries', () => {
    expect(golden.length).toBeGreaterThanOrEqual(150);
    expect(new Set(golden.map((x) => x.q)).size).toBe(golden.length);
  });

  it.each(golden.map((x) => [x.q, x] as const))('%s', async (_q, c) => {
    const r = await gazetteer.geocode(c.q);
    if (!r.ok) throw new Error(`${c.q}: ${r.reason}: ${r.message}`);
    const p = r.place;
    expect(p.query).toBe(c.q);
    expect(p.kind).toBe(c.kind);
    if (typeof c.name === 'string') expect(p.name).toBe(c.name);
    else expect(p.name).toMatch(c.name);
    const km = haversineMeters(p, { lat: c.at[0], lng: c.at[1] }) / 1000;
    expect(km, `${c.q} is ${km.toFixed(2)} km from where it should be`).toBeLessThanOrEqual(c.km);
    expect(p.countryCode).toBe('GB');
    expect(typeof p.postcodeDistrict).toBe('string');
    if (p.postcodeDistrict?.startsWith('BT')) expect(p.localAuthorityCode).toBeNull();
    else expect(p.localAuthorityCode).toMatch(/^[ESW]\d{8}$/);
    if (c.extra) expect(p).toMatchObject(c.extra);
    if (p.kind !== 'airport') {
      expect(p.iata).toBeUndefined();
      expect(p.terminal).toBeUndefined();
    }
  });
});

describe('councils for the tariff engine', () => {
  it.each([
    ['Manchester Piccadilly', 'E08000003'],
    ['Heathrow', 'E09000017'],
    ['Glasgow Central', 'S12000049'],
    ['Cardiff Central', 'W06000015'],
    ['Newport, Wales', 'W06000022'],
    ['Bracknell', 'E06000036'],
    ['Sheffield', 'E08000039'],
    ['Nottingham', 'E06000018'],
    ['Brighton', 'E06000043'],
  ])('%s → %s', async (q, code) => {
    const r = await gazetteer.geocode(q);
    expect(r.ok && r.place.localAuthorityCode).toBe(code);
  });
});

describe('places outside the UK', () => {
  it.each([
    ['JFK', 'JFK', 'US', [40.6413, -73.7781]],
    ['Paris CDG', 'CDG', 'FR', [49.0097, 2.5479]],
    ['CDG', 'CDG', 'FR', [49.0097, 2.5479]],
    ['Paris Charles de Gaulle', 'CDG', 'FR', [49.0097, 2.5479]],
    ['jfk airport', 'JFK', 'US', [40.6413, -73.7781]],
    ['Dublin Airport', 'DUB', 'IE', [53.4264, -6.2499]],
    ['Amsterdam Schiphol', 'AMS', 'NL', [52.3105, 4.7683]],
    // A full name abroad is that airport, not a UK one of a shorter name (Perth, Scotland).
    ['Perth International Airport', 'PER', 'AU', [-31.9403, 115.967]],
    ['Dubai International Airport Terminal 3', 'DXB', 'AE', [25.2528, 55.3644]],
  ] as const)('%s is outside_uk, and resolves with worldwide', async (q, iata, country, at) => {
    const r = await gazetteer.geocode(q);
    expect(r).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(!r.ok && r.message).toContain('outside the UK');
    expect(!r.ok && r.message).toContain('worldwide');
    const w = await gazetteer.geocode(q, { worldwide: true });
    if (!w.ok) throw new Error(w.message);
    expect(w.place).toMatchObject({
      kind: 'airport',
      iata,
      countryCode: country,
      localAuthorityCode: null,
      postcodeDistrict: null,
    });
    expect(haversineMeters(w.place, { lat: at[0], lng: at[1] })).toBeLessThan(3_000);
  });

  it('UK places still resolve the same with worldwide', async () => {
    for (const q of ['Leeds', 'Heathrow T5', 'SW1A 2AA', 'MAN']) {
      expect(await gazetteer.geocode(q, { worldwide: true })).toEqual(await gazetteer.geocode(q));
    }
  });

  it('an address abroad names the airport to send instead, with worldwide as without (no street abroad is known)', async () => {
    const without = await gazetteer.geocode('Eiffel Tower, Paris');
    expect(without).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(without.ok ? '' : without.message).toBe(
      '"Eiffel Tower, Paris" is outside the UK (Paris, France), where only airports are booked: name one (e.g. "Charles de Gaulle International Airport"); send worldwide: true to use places abroad',
    );
    const withWorldwide = await gazetteer.geocode('Eiffel Tower, Paris', { worldwide: true });
    expect(withWorldwide).toMatchObject({ ok: false, reason: 'not_found' });
    expect(withWorldwide.ok ? '' : withWorldwide.message).toBe(
      'No UK place matches "Eiffel Tower, Paris"; abroad, only airports are booked: name one (e.g. "Charles de Gaulle International Airport")',
    );
    // The airport it names resolves.
    expect(await gazetteer.geocode('Charles de Gaulle International Airport', { worldwide: true })).toMatchObject({
      ok: true,
      place: { kind: 'airport', iata: 'CDG' },
    });
    // An address whose part names the airport is that airport.
    expect(await gazetteer.geocode('Gate 5, Dublin Airport', { worldwide: true })).toMatchObject({
      ok: true,
      place: { kind: 'airport', iata: 'DUB' },
    });
    expect(await gazetteer.geocode('Gate 5, Dublin Airport')).toMatchObject({ ok: false, reason: 'outside_uk' });
  });

  it('Channel Islands postcodes are outside the UK', async () => {
    expect(await gazetteer.geocode('GY1 1AA')).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(await gazetteer.geocode('JE2 3QA', { worldwide: true })).toMatchObject({ ok: false, reason: 'not_found' });
  });

  it('a code that is a UK station and a foreign airport is the station unless "airport" is said', async () => {
    const bare = await gazetteer.geocode('BCN');
    expect(bare.ok && bare.place).toMatchObject({ kind: 'station', name: 'Branchton' });
    expect(await gazetteer.geocode('BCN airport')).toMatchObject({ ok: false, reason: 'outside_uk' });
  });
});

describe('a qualifier naming a region abroad is not ignored ("Newark, NJ" is not Newark-on-Trent)', () => {
  // The name has a UK place (an alias, a post town or a town), the qualifier matches none of
  // them: it was dropped and the UK place returned as an address.
  it.each([
    ['Newark, NJ', 'EWR'],
    ['Newark, New Jersey', 'EWR'],
    ['Newark, USA', 'EWR'],
    ['Newark, NJ, USA', 'EWR'],
    ['Boston, Massachusetts', 'BOS'],
    ['Boston, MA', 'BOS'],
    ['Birmingham, Alabama', 'BHM'],
    ['Richmond, Virginia', 'RIC'],
    ['London, Ontario', 'YXU'],
    ['Perth, WA', 'PER'],
    ['Newark Airport, NJ', 'EWR'],
  ] as const)('%s is outside_uk, and with worldwide the airport there (%s)', async (q, iata) => {
    const r = await gazetteer.geocode(q);
    expect(r).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(!r.ok && r.message).toContain('worldwide');
    expect(await gazetteer.geocode(q, { worldwide: true })).toMatchObject({
      ok: true,
      place: { kind: 'airport', iata, postcodeDistrict: null },
    });
  });

  it.each(['Montgomery, Alabama'])('%s is outside_uk, and with worldwide an airport in the US', async (q) => {
    expect(await gazetteer.geocode(q)).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(await gazetteer.geocode(q, { worldwide: true })).toMatchObject({ ok: true, place: { countryCode: 'US' } });
  });

  it.each([
    'Enfield, Connecticut',
    'Malvern, Pennsylvania',
    'Cambridge, Massachusetts',
    'Cambridge, MA',
    'Enfield, Germany',
    'Malvern, Ireland',
  ])('%s, with no airport of the name there, is outside_uk, and not_found with worldwide', async (q) => {
    const r = await gazetteer.geocode(q);
    expect(r).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(!r.ok && r.message).toContain('outside the UK');
    expect(await gazetteer.geocode(q, { worldwide: true })).toMatchObject({ ok: false, reason: 'not_found' });
  });

  it('an address there is outside the UK too, naming the airport to send', async () => {
    const r = await gazetteer.geocode('10 Broad Street, Newark, NJ');
    expect(r).toMatchObject({ ok: false, reason: 'outside_uk' });
    expect(!r.ok && r.message).toContain('Newark Liberty International Airport');
    expect(await gazetteer.geocode('10 Broad Street, Newark, NJ', { worldwide: true })).toMatchObject({
      ok: false,
      reason: 'not_found',
    });
    expect(await gazetteer.geocode('Main Street, Boston, MA')).toMatchObject({ ok: false, reason: 'outside_uk' });
  });

  it('UK qualifiers, and qualifiers that name a UK place or area, stay UK', async () => {
    for (const [q, name] of [
      ['Newark', 'Newark on Trent'],
      ['Newark, Nottinghamshire', 'Newark on Trent'],
      ['Malvern, Worcestershire', 'Great Malvern'],
      ['Richmond, Surrey', 'Richmond'],
      ['Perth, Scotland', 'Perth'],
      ['Montgomery, Powys', 'Montgomery'],
    ] as const) {
      const r = await gazetteer.geocode(q);
      expect(r.ok && r.place, q).toMatchObject({ name, countryCode: 'GB' });
    }
    // "Ireland" names the island too; "Victoria", "Washington" and "Holland" (South Holland)
    // are the UK's; a code that is a UK postcode area is read as one beside a town in it, and
    // "NE" is the North East.
    for (const q of [
      'Belfast, Ireland',
      'Derry, Ireland',
      'Richmond, Victoria',
      'Spalding, Holland',
      'Rochester, ME',
      'Lancaster, LA',
      'Washington, NE',
      'Sunderland, NE',
      'Swansea, SA',
    ]) {
      const r = await gazetteer.geocode(q);
      expect(r.ok && r.place.countryCode, q).toBe('GB');
    }
  });

  it('a country the airport data names still picks its airport', async () => {
    for (const [q, iata] of [
      ['Paris, France', 'CDG'],
      ['Dublin, Ireland', 'DUB'],
      ['Dublin, Republic of Ireland', 'DUB'],
      ['Perth, Australia', 'PER'],
    ] as const) {
      expect(await gazetteer.geocode(q), q).toMatchObject({ ok: false, reason: 'outside_uk' });
      expect(await gazetteer.geocode(q, { worldwide: true }), q).toMatchObject({ ok: true, place: { iata } });
    }
    // "Paris, Texas" with worldwide was Charles de Gaulle.
    expect(await gazetteer.geocode('Paris, Texas', { worldwide: true })).toMatchObject({
      ok: true,
      place: { countryCode: 'US' },
    });
  });
});

describe('not found', () => {
  it.each([
    'asdfghjkl',
    'zzqx blorf',
    'Narnia',
    'Hogwarts Castle',
    'qwertyuiop station',
    '!!!',
    '',
    '   ',
    'XX1 1XX',
    'Terminal',
  ])('%j is not_found, naming the query', async (q) => {
    const r = await gazetteer.geocode(q);
    expect(r).toMatchObject({ ok: false, reason: 'not_found' });
    if (!r.ok && q.trim() !== '' && /[a-z]{3}/i.test(q)) expect(r.message).toContain(q);
  });
});

describe('North and South are terminals only of Gatwick, right after its name', () => {
  it.each([
    'North',
    'South',
    'North Terminal',
    'Shields North',
    'Heathrow North',
    'Stansted South',
    'Gatwick North Yorkshire',
    'Gatwick South station',
  ])('%j is no Gatwick terminal', async (q) => {
    const r = await gazetteer.geocode(q);
    if (r.ok) expect(r.place.terminal, `${q}: ${r.place.name}`).toBeUndefined();
  });

  it('leaves a place named North or South alone', async () => {
    for (const q of ['North', 'South', 'Shields North']) {
      expect(await gazetteer.geocode(q)).toMatchObject({ ok: false, reason: 'not_found' });
    }
  });
});

describe('"<town> Airport" with where at the airport', () => {
  // The airport, whatever is said of where at it, and the same airport as "<town> Airport".
  it.each([
    ['Newquay', 'NQY'],
    ['Derry', 'LDY'],
    ['Bristol', 'BRS'],
    ['Exeter', 'EXT'],
    ['Inverness', 'INV'],
    ['Aberdeen', 'ABZ'],
    ['Southampton', 'SOU'],
    ['Luton', 'LTN'],
    ['Stansted', 'STN'],
    ['Norwich', 'NWI'],
    ['Bournemouth', 'BOH'],
    ['Cardiff', 'CWL'],
    ['Birmingham', 'BHX'],
    ['Glasgow', 'GLA'],
    ['Edinburgh', 'EDI'],
    ['Manchester', 'MAN'],
    ['Liverpool', 'LPL'],
    ['Newcastle', 'NCL'],
    ['Leeds Bradford', 'LBA'],
    ['Teesside', 'MME'],
    ['Prestwick', 'PIK'],
  ])('%s Airport is %s', async (town, iata) => {
    for (const q of [
      `${town} Airport`,
      `${town} Airport arrivals`,
      `${town} Airport departures`,
      `${town} Airport, Departures`,
      `${town} Airport terminal`,
    ]) {
      const r = await gazetteer.geocode(q);
      expect(r.ok && { kind: r.place.kind, iata: r.place.iata }, q).toEqual({ kind: 'airport', iata });
    }
  });
});

describe('a code beside the name of its place ("Manchester Airport (MAN)")', () => {
  // The code is a short form of the place named in another part of the text, as booking sites
  // and assistants write it; it does not pull the result to what the code alone would name.
  it.each([
    ['Manchester Airport (MAN)', 'airport', 'Manchester Airport'],
    ['Manchester Airport, MAN', 'airport', 'Manchester Airport'],
    ['MAN (Manchester Airport)', 'airport', 'Manchester Airport'],
    ['Manchester Airport T2 (MAN)', 'airport', 'Manchester Airport, Terminal 2'],
    ['Southampton Airport (SOU)', 'airport', 'Southampton Airport'],
    ['Southampton Airport, SOU', 'airport', 'Southampton Airport'],
    ['Newcastle Airport (NCL)', 'airport', 'Newcastle Airport'],
    ['Inverness Airport (INV)', 'airport', 'Inverness Airport'],
    ['Heathrow Airport (LHR)', 'airport', 'London Heathrow Airport'],
    ['Gatwick Airport (LGW)', 'airport', 'London Gatwick Airport'],
    ['Bristol Airport (BRS)', 'airport', 'Bristol Airport'],
    ['London Stansted Airport (STN)', 'airport', 'London Stansted Airport'],
    ['Heathrow Terminal 5 (LHR)', 'airport', 'London Heathrow Airport, Terminal 5'],
    // A station with its own CRS code, or the code of the airport it serves.
    ['Manchester Airport station (MAN)', 'station', 'Manchester Airport'],
    ['Luton Airport Parkway (LTN)', 'station', 'Luton Airport Parkway'],
    ['Berrylands (BRS)', 'station', 'Berrylands'],
    ['Exeter St Thomas (EXT)', 'station', 'Exeter St Thomas'],
    ['Leeds station (LDS)', 'station', 'Leeds'],
    ['Kings Cross (KGX)', 'station', 'London Kings Cross'],
    ['Manchester Piccadilly (MAN)', 'station', 'Manchester Piccadilly'],
    ['Manchester Piccadilly station, MAN', 'station', 'Manchester Piccadilly'],
    ['MAN (Manchester Piccadilly)', 'station', 'Manchester Piccadilly'],
    ['Southampton Central (SOU)', 'station', 'Southampton Central'],
    // The code alone, or beside a name it does not agree with, reads as before.
    ['MAN', 'station', 'Manchester Piccadilly'],
    ['MAN airport', 'airport', 'Manchester Airport'],
    ['Manchester Airport', 'airport', 'Manchester Airport'],
    ['Manchester (MAN)', 'station', 'Manchester Piccadilly'],
    ['Gatwick Airport (GTW)', 'station', 'Gatwick Airport'],
  ] as const)('%j is the %s %j', async (q, kind, name) => {
    const r = await gazetteer.geocode(q);
    expect(r.ok && { kind: r.place.kind, name: r.place.name }, q).toEqual({ kind, name });
  });
});

describe('addresses written as map apps and assistants write them', () => {
  // Each was a different town or a point miles away: a terminal or "Arrivals" first, the
  // airport named with a locality we do not know (or read as another far off), a council or
  // county named as people name it, a qualifier naming the place itself.
  const T5 = [51.4723, -0.4884] as const;
  const MAN_AIRPORT = [53.3537, -2.275] as const;
  it.each([
    ['Terminal 5, Heathrow Airport, London', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['T5, Heathrow Airport, London', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['Terminal 5, London Heathrow, Hounslow', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    [
      'Terminal 2, London Heathrow Airport, Hounslow',
      'airport',
      'London Heathrow Airport, Terminal 2',
      [51.4713, -0.4524],
      1,
    ],
    ['Terminal 1, Manchester Airport, Manchester', 'airport', 'Manchester Airport, Terminal 1', MAN_AIRPORT, 2],
    [
      'North Terminal, Gatwick Airport, Crawley',
      'airport',
      'London Gatwick Airport, North Terminal',
      [51.162, -0.1772],
      1,
    ],
    [
      'Departures, Gatwick North Terminal, Crawley',
      'airport',
      'London Gatwick Airport, North Terminal',
      [51.162, -0.1772],
      1,
    ],
    ['Arrivals, Heathrow Terminal 5, London', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['Departures, Edinburgh Airport, Edinburgh', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 3],
    ['Heathrow Airport Terminal 5, Longford', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['Heathrow Airport, Longford', 'airport', 'London Heathrow Airport', [51.47, -0.4543], 3],
    ['Heathrow Airport, Harlington', 'airport', 'London Heathrow Airport', [51.47, -0.4543], 3],
    ['Heathrow, Sipson', 'airport', 'London Heathrow Airport', [51.47, -0.4543], 3],
    ['Luton Airport, Wigmore', 'airport', 'London Luton Airport', [51.8747, -0.3683], 3],
    ['Manchester Airport, Ringway', 'airport', 'Manchester Airport', MAN_AIRPORT, 3],
    ['Stansted Airport, Stansted', 'airport', 'London Stansted Airport', [51.886, 0.2389], 3],
    ['Fort William, Highlands', 'place', 'Fort William', [56.8198, -5.1052], 5],
    ['Aviemore, Highlands', 'place', 'Aviemore', [57.1953, -3.8244], 5],
    ['Portree, Highlands', 'place', 'Portree', [57.4125, -6.1942], 5],
    ['Bury, Greater Manchester', 'place', 'Bury', [53.593, -2.298], 5],
    ['Wigan, Greater Manchester', 'place', 'Wigan', [53.545, -2.6325], 5],
    ['Altrincham, Greater Manchester', 'place', 'Altrincham', [53.3838, -2.3527], 5],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });

  it('keeps a terminal alone, a code for the station at its airport, and a town after a terminal', async () => {
    expect(await gazetteer.geocode('Terminal 5')).toMatchObject({ ok: false });
    expect(await gazetteer.geocode('Gatwick Airport (GTW)')).toMatchObject({
      ok: true,
      place: { kind: 'station', name: 'Gatwick Airport' },
    });
    expect(await gazetteer.geocode('Terminal 5, London')).toMatchObject({
      ok: true,
      place: { kind: 'address', name: 'Terminal 5, London' },
    });
  });
});

describe("where at an airport beside a town alone is the town's airport", () => {
  // With the terminal or Departures part dropped and no airport named, the town was left:
  // "Terminal 1, Manchester" was central Manchester, 14 km from the airport, kind place
  // ("Arrivals, Glasgow" 11 km, "Departures, Birmingham" 11 km, "North Terminal, Crawley"
  // 5 km from the North Terminal); airport rules were missed.
  const MAN_AIRPORT = [53.3537, -2.275] as const;
  const GLA = [55.8719, -4.4331] as const;
  const BHX = [52.4539, -1.748] as const;
  it.each([
    ['Terminal 1, Manchester', 'airport', 'Manchester Airport, Terminal 1', MAN_AIRPORT, 2],
    ['Manchester, Terminal 2', 'airport', 'Manchester Airport, Terminal 2', MAN_AIRPORT, 2],
    ['Terminal 2, Manchester, UK', 'airport', 'Manchester Airport, Terminal 2', MAN_AIRPORT, 2],
    ['Arrivals, Glasgow', 'airport', 'Glasgow International Airport', GLA, 2],
    ['Departures, Birmingham', 'airport', 'Birmingham International Airport', BHX, 2],
    ['Arrivals, Leeds', 'airport', 'Leeds Bradford Airport', [53.8659, -1.6606], 2],
    ['Departures, Bristol', 'airport', 'Bristol Airport', [51.3827, -2.7191], 2],
    // A town no airport names, whose airport it is (Gatwick is in Crawley's part of RH6).
    ['North Terminal, Crawley', 'airport', 'London Gatwick Airport, North Terminal', GATWICK_NORTH, 1],
    ['Departures, Crawley', 'airport', 'London Gatwick Airport', GATWICK, 3],
    ['Arrivals, Paisley', 'airport', 'Glasgow International Airport', GLA, 2],
    ['Arrivals, Solihull', 'airport', 'Birmingham International Airport', BHX, 2],
    // A terminal the airport does not have is dropped: Gatwick's are North and South, and only
    // Gatwick names its terminals so.
    ['Terminal 5, Crawley', 'airport', 'London Gatwick Airport', GATWICK, 3],
    ['North Terminal, Manchester', 'airport', 'Manchester Airport', MAN_AIRPORT, 2],
    // No airport of the town's own (none, a minor airfield, or several): an address at the
    // town's point named as written, as before the terminal part was dropped (it was the town,
    // "London", kind place, and the terminal was lost from the driver's name).
    ['Arrivals, York', 'address', 'Arrivals, York', [53.959, -1.0815], 5],
    ['Terminal 5, London', 'address', 'Terminal 5, London', [51.5074, -0.1278], 5],
    ['Terminal 1, Belfast', 'address', 'Terminal 1, Belfast', [54.597, -5.93], 5],
    ['Departures, Bath', 'address', 'Departures, Bath', [51.3811, -2.359], 5],
    ['Arrivals, Belfast', 'address', 'Arrivals, Belfast', [54.597, -5.93], 5],
    ['Arrivals, Nottingham', 'address', 'Arrivals, Nottingham', [52.9548, -1.1581], 5],
    // Unchanged: an airport named, or no terminal part.
    ['Terminal 5, Heathrow Airport, London', 'airport', 'London Heathrow Airport, Terminal 5', [51.4723, -0.4884], 1],
    [
      'Departures, Gatwick North Terminal, Crawley',
      'airport',
      'London Gatwick Airport, North Terminal',
      GATWICK_NORTH,
      1,
    ],
    ['Heathrow, Terminal 5', 'airport', 'London Heathrow Airport, Terminal 5', [51.4723, -0.4884], 1],
    ['Departures, Manchester Piccadilly', 'station', 'Manchester Piccadilly', PICCADILLY, 1],
    ['Manchester', 'place', 'Manchester', [53.4808, -2.2426], 5],
    ['Crawley', 'place', 'Crawley', [51.1091, -0.1872], 5],
    ['Glasgow Central', 'station', 'Glasgow Central', [55.8589, -4.2578], 1],
    ['Arrivals, 12 High Street, Crawley', 'address', 'Arrivals, 12 High Street, Crawley', [51.1091, -0.1872], 3],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });

  it('keeps a terminal alone unresolved', async () => {
    expect(await gazetteer.geocode('Terminal 5')).toMatchObject({ ok: false });
  });
});

describe('a station or airport named beside its postcode', () => {
  // Map apps and assistants write the postcode after the place: the postcode won, and the
  // place was its district's centre, kind address (Edinburgh Airport 5.8 km off, Bristol
  // Airport 5.1 km, King's Cross 2 km), so airport and station rules were missed.
  const T5 = [51.4723, -0.4884] as const;
  it.each([
    ['Edinburgh Airport (EDI), Edinburgh EH12 9DN, UK', 'airport', 'Edinburgh Airport', [55.95, -3.3725], 1],
    ['Bristol Airport, Bristol BS48 3DY', 'airport', 'Bristol Airport', [51.3827, -2.7191], 1],
    ['Heathrow Terminal 5, Longford, Hounslow TW6 2GA', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['Heathrow Airport, Terminal 5, Hounslow TW6 2GA', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['London Luton Airport, Airport Way, Luton LU2 9LY', 'airport', 'London Luton Airport', [51.8747, -0.3683], 1],
    ['Luton Airport, Luton LU2 9LY', 'airport', 'London Luton Airport', [51.8747, -0.3683], 1],
    ['Stansted Airport, Stansted CM24 1QW', 'airport', 'London Stansted Airport', [51.886, 0.2389], 1],
    [
      'Terminal 2, Manchester Airport, Manchester M90 1QX',
      'airport',
      'Manchester Airport, Terminal 2',
      [53.3537, -2.275],
      1,
    ],
    ["King's Cross Station, Euston Road, London N1 9AL", 'station', 'London Kings Cross', KINGS_CROSS, 1],
    // Of two stations of the name, the one near the postcode (not Southampton's).
    ['Redbridge Station, Ilford IG4 9DN', 'station', 'Redbridge', [51.5763, 0.0454], 1],
    // Still addresses: no station or airport named, a name that may be the street or the
    // neighbourhood without the word station, or a place far from the postcode.
    ['22 Deansgate, Manchester M3 2BW', 'address', '22 Deansgate, Manchester M3 2BW', [53.48, -2.248], 3],
    ['SW1A 2AA', 'postcode', 'SW1A 2AA', DOWNING_STREET, 3],
    ['10 Downing Street, London SW1A 2AA', 'address', '10 Downing Street, London SW1A 2AA', DOWNING_STREET, 3],
    ['Baker Street, London NW1 6XE', 'address', 'Baker Street, London NW1 6XE', [51.5238, -0.1586], 3],
    ['Hampstead, London NW3 2PT', 'address', 'Hampstead, London NW3 2PT', [51.5566, -0.178], 3],
    ['Lower Street, Stansted CM24 8LP', 'address', 'Lower Street, Stansted CM24 8LP', [51.8988, 0.1995], 3],
    [
      "King's Cross Station, Manchester M1 1AE",
      'address',
      "King's Cross Station, Manchester M1 1AE",
      [53.478, -2.236],
      3,
    ],
    ['Edinburgh Airport, EH1 1YZ', 'address', 'Edinburgh Airport, EH1 1YZ', [55.95, -3.19], 3],
    ['Heathrow Airport, Manchester M1 1AE', 'address', 'Heathrow Airport, Manchester M1 1AE', [53.478, -2.236], 3],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });
});

describe('a venue written before the airport or station it is at', () => {
  // The town after the airport or station was the point: "Hilton Garden Inn, Bristol Airport,
  // Bristol" was central Bristol, 8 km off, kind address (Edinburgh's 10 km, Manchester's 14
  // km). The venue is an address at the airport or station, named as written: as the airport
  // (ccf1c3e) the hotel was lost from the driver's name and airport rules and meet and greet
  // applied to a hotel pickup.
  const T5 = [51.4723, -0.4884] as const;
  const BRISTOL_AIRPORT = [51.3827, -2.7191] as const;
  it.each([
    [
      'Hilton Garden Inn, Bristol Airport, Bristol',
      'address',
      'Hilton Garden Inn, Bristol Airport, Bristol',
      BRISTOL_AIRPORT,
      1,
    ],
    ['Costa, Bristol Airport, Bristol, UK', 'address', 'Costa, Bristol Airport, Bristol, UK', BRISTOL_AIRPORT, 1],
    [
      'Premier Inn, Manchester Airport, Manchester',
      'address',
      'Premier Inn, Manchester Airport, Manchester',
      [53.3537, -2.275],
      2,
    ],
    [
      'Travelodge, Edinburgh Airport, Edinburgh',
      'address',
      'Travelodge, Edinburgh Airport, Edinburgh',
      [55.95, -3.3725],
      1,
    ],
    ['Premier Inn, Heathrow Terminal 5, London', 'address', 'Premier Inn, Heathrow Terminal 5, London', T5, 1],
    ['Pret, Heathrow Terminal 2, London', 'address', 'Pret, Heathrow Terminal 2, London', [51.4713, -0.4524], 1],
    [
      'WHSmith, Manchester Piccadilly station, Manchester',
      'address',
      'WHSmith, Manchester Piccadilly station, Manchester',
      PICCADILLY,
      1,
    ],
    ['Costa, Leeds station, Leeds', 'address', 'Costa, Leeds station, Leeds', [53.7951, -1.548], 1],
    ['Costa, York station, York', 'address', 'Costa, York station, York', [53.958, -1.0933], 1],
    ['Boots, Kings Cross station, London', 'address', 'Boots, Kings Cross station, London', KINGS_CROSS, 1],
    ['Boots, Wimbledon station, London', 'address', 'Boots, Wimbledon station, London', [51.4214, -0.2064], 1],
    // Already so, and unchanged: the airport or station last, or alone.
    ['Tesco, Heathrow Airport', 'airport', 'London Heathrow Airport', HEATHROW, 3],
    ['Premier Inn, Heathrow Terminal 5', 'airport', 'London Heathrow Airport, Terminal 5', T5, 1],
    ['Costa, Leeds station', 'station', 'Leeds', [53.7951, -1.548], 1],
    // Still addresses or places: no station or airport named with its word, one far from the
    // town after it, or a house number.
    ['Hilton Bristol City Centre, Bristol', 'address', 'Hilton Bristol City Centre, Bristol', [51.4545, -2.5879], 3],
    ['Bristol', 'place', 'Bristol', [51.4545, -2.5879], 5],
    ['Bath Road, Heathrow', 'airport', 'London Heathrow Airport', HEATHROW, 3],
    ['Station Road, Bristol', 'address', 'Station Road, Bristol', [51.4545, -2.5879], 3],
    ['Hilton, Bristol Airport, Manchester', 'address', 'Hilton, Bristol Airport, Manchester', [53.4808, -2.2426], 3],
    ['Unit 5, Bristol Airport, Bristol', 'address', 'Unit 5, Bristol Airport, Bristol', [51.4545, -2.5879], 3],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });

  it("takes the airport's or station's district and council, but no airport or station codes", async () => {
    const hotel = await gazetteer.geocode('Hilton Garden Inn, Bristol Airport, Bristol');
    expect(hotel).toMatchObject({ ok: true, place: { postcodeDistrict: 'BS40', localAuthorityCode: 'E06000024' } });
    expect(hotel.ok && [hotel.place.iata, hotel.place.terminal, hotel.place.crs]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    const pret = await gazetteer.geocode('Pret, Heathrow Terminal 2, London');
    expect(pret).toMatchObject({ ok: true, place: { postcodeDistrict: 'TW6', localAuthorityCode: 'E09000017' } });
    expect(pret.ok && [pret.place.iata, pret.place.terminal]).toEqual([undefined, undefined]);
  });
});

describe("a station's official name beside its postcode, without the word station", () => {
  // "London Kings Cross, N1 9AL" was N1's centre, 1.8 km off, kind address. Only London's
  // termini and the cities' main stations (MAIN_STATIONS) by their full official names: other
  // station names may be a street's or a neighbourhood's, which the postcode's address keeps.
  it.each([
    ['London Kings Cross, N1 9AL', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ["London King's Cross, London N1 9AL", 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['London Euston, NW1 2RT', 'station', 'London Euston', EUSTON, 1],
    ['London Paddington W2 1HQ', 'station', 'London Paddington', [51.5154, -0.1755], 1],
    ['Manchester Piccadilly, M1 2BN', 'station', 'Manchester Piccadilly', PICCADILLY, 1],
    ['Birmingham New Street, B2 4QA', 'station', 'Birmingham New Street', [52.4778, -1.8983], 1],
    ['Baker Street, London NW1 6XE', 'address', 'Baker Street, London NW1 6XE', [51.5238, -0.1586], 3],
    ['Old Street, London EC1V 9NR', 'address', 'Old Street, London EC1V 9NR', [51.5263, -0.0876], 3],
    ['London Bridge, SE1 9SP', 'address', 'London Bridge, SE1 9SP', [51.5045, -0.0865], 3],
    ['Kings Cross, London N1 9AL', 'address', 'Kings Cross, London N1 9AL', KINGS_CROSS, 3],
    ['Ealing Broadway, London W5 2NU', 'address', 'Ealing Broadway, London W5 2NU', [51.5149, -0.3017], 3],
    ['Leeds, LS1 4DY', 'address', 'Leeds, LS1 4DY', [53.797, -1.549], 3],
    // Far from the postcode: the postcode stands.
    ['London Kings Cross, M1 1AE', 'address', 'London Kings Cross, M1 1AE', [53.478, -2.236], 3],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });
});

describe('"<town> station" where the station has another name', () => {
  // "Bath station" was the town of Bath, kind place (Bath Spa is 0.5 km off), "Milton Keynes
  // station" the town 1.5 km from Milton Keynes Central, "Stoke station" Stoke-on-Trent's
  // centre: station rules were missed.
  it.each([
    ['Bath station', 'station', 'Bath Spa', [51.3777, -2.3572], 1],
    ['Bath Spa station', 'station', 'Bath Spa', [51.3777, -2.3572], 1],
    ['Stoke station', 'station', 'Stoke-On-Trent', [53.008, -2.1807], 1],
    ['Milton Keynes station', 'station', 'Milton Keynes Central', [52.0342, -0.7741], 1],
    ['Cheltenham railway station', 'station', 'Cheltenham Spa', [51.8973, -2.0997], 1],
    ['Costa, Bath station', 'station', 'Bath Spa', [51.3777, -2.3572], 1],
    // Unchanged: the town without the word, a station of the town's own name or MAIN_STATIONS,
    // and a town with several stations named after it.
    ['Manchester station', 'station', 'Manchester Piccadilly', PICCADILLY, 1],
    ['Leeds station', 'station', 'Leeds', [53.7951, -1.548], 1],
    ['Bristol station', 'station', 'Bristol Temple Meads', [51.4491, -2.5813], 1],
    ['Bath', 'place', 'Bath', [51.3811, -2.359], 5],
    ['Stoke', 'place', 'Stoke-on-Trent', [53.0027, -2.1794], 5],
    ['Milton Keynes', 'place', 'Milton Keynes', [52.0406, -0.7594], 5],
    ['Leeds', 'place', 'Leeds', [53.7997, -1.5492], 5],
    ['Stoke Newington', 'station', 'Stoke Newington', [51.5652, -0.0728], 1],
    ['Harrow station', 'place', 'Harrow', [51.5806, -0.342], 5],
    ['Livingston station', 'place', 'Livingston', [55.9029, -3.5226], 5],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });
});

describe('"St" for Street and "X" for Cross in station names, and short forms of big stations', () => {
  // "Liverpool Lime St", "Kings X", "Manchester Picc" and "Bristol TM" were 422
  // address_not_found where the long forms resolve. "St" last (not "St Pancras": Saint) and "X"
  // after the first word are read as Street and Cross when the text as written names nothing
  // and the long form names a station; the short forms are STATION_SHORT_FORMS. Real-world
  // points, not read from our data files.
  const LIME_STREET = [53.4075, -2.977] as const;
  const NEW_STREET = [52.4778, -1.899] as const;
  const TEMPLE_MEADS = [51.4491, -2.5813] as const;
  it.each([
    ['Liverpool Lime St', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Liverpool Lime St.', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Liverpool Lime St station', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Lime St', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Lime St station, Liverpool', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Glasgow Queen St', 'station', 'Glasgow Queen Street', [55.8622, -4.2511], 1],
    ['Birmingham New St', 'station', 'Birmingham New Street', NEW_STREET, 1],
    ['New St station', 'station', 'Birmingham New Street', NEW_STREET, 1],
    ['Liverpool St', 'station', 'London Liverpool Street', [51.5178, -0.0823], 1],
    ['Liverpool St station, London', 'station', 'London Liverpool Street', [51.5178, -0.0823], 1],
    ['Baker St', 'station', 'Baker Street', BAKER_STREET, 1],
    ['Kings X', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ["King's X", 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['KINGS X', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['Kings X station', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['Kings X, London', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['Kings X St Pancras', 'station', 'London Kings Cross', KINGS_CROSS, 1],
    ['Charing X', 'station', 'London Charing Cross', [51.508, -0.1247], 1],
    ['Charing X, Glasgow', 'station', 'Charing Cross (Glasgow)', [55.8647, -4.2696], 1],
    ['New X Gate', 'station', 'New Cross Gate', [51.4752, -0.0403], 1],
    // As the long form ranks: "Chester-le-Street" is the town, its station only with the word.
    ['Chester-le-St', 'place', 'Chester-le-Street', [54.8586, -1.5741], 5],
    ['Chester-le-St station', 'station', 'Chester-Le-Street', [54.8546, -1.5779], 1],
    // Short forms.
    ['Manchester Picc', 'station', 'Manchester Piccadilly', PICCADILLY, 1],
    ['Manchester Picc station', 'station', 'Manchester Piccadilly', PICCADILLY, 1],
    ['Bristol TM', 'station', 'Bristol Temple Meads', TEMPLE_MEADS, 1],
    ['Bristol T M', 'station', 'Bristol Temple Meads', TEMPLE_MEADS, 1],
    ['Brum New St', 'station', 'Birmingham New Street', NEW_STREET, 1],
    ["B'ham New St", 'station', 'Birmingham New Street', NEW_STREET, 1],
    ['Bham New Street', 'station', 'Birmingham New Street', NEW_STREET, 1],
    // Unchanged: "St" first or in the middle is Saint; the long forms; the towns.
    ['St Pancras', 'station', 'London St Pancras International', [51.5319, -0.1263], 1],
    ['Exeter St Davids', 'station', 'Exeter St Davids', [50.7292, -3.5434], 1],
    ['St Albans', 'place', 'St Albans', [51.752, -0.336], 5],
    ['Liverpool Lime Street', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Lime Street, Liverpool', 'station', 'Liverpool Lime Street', LIME_STREET, 1],
    ['Bristol', 'place', 'Bristol', [51.4545, -2.5879], 5],
    // A street "St" with its town after it stays the street there, an address in the town, as
    // before: "Lime St, Liverpool" (the station is on it, but the text says no more), and
    // streets whose long forms name a station far off ("Baker Street, St Albans" is the London
    // station, 30 km away; "Park Street" a station in Hertfordshire). Without a postcode an
    // address is at its town's point (the data has no streets).
    ['Lime St, Liverpool', 'address', 'Lime St, Liverpool', LIME_STREET, 1],
    ['12 Lime St, Liverpool', 'address', '12 Lime St, Liverpool', LIME_STREET, 1],
    ['Liverpool St, London', 'address', 'Liverpool St, London', [51.5074, -0.1278], 1],
    ['Baker St, St Albans', 'address', 'Baker St, St Albans', [51.752, -0.336], 5],
    ['Park St, Bristol', 'address', 'Park St, Bristol', [51.4545, -2.5879], 5],
    ['Queen St, Glasgow', 'address', 'Queen St, Glasgow', [55.8642, -4.2518], 5],
    ['Bold St, Liverpool', 'address', 'Bold St, Liverpool', [53.4025, -2.979], 2],
    ['Oxford St, London', 'address', 'Oxford St, London', [51.5074, -0.1278], 1],
    // As "Kings Cross, London N1 9AL" (the area) beside its postcode: the postcode's address.
    ['Kings X, London N1 9AL', 'address', 'Kings X, London N1 9AL', KINGS_CROSS, 3],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km) => {
    await expectPlace(q, { kind, name }, at, km);
  });

  it.each([
    // No station is named so: not read as one, nor matched fuzzily to one ("Bond Street").
    'Oxford St',
    'Bold St',
    // Short forms that are not unambiguous stay unknown: Piccadilly Circus, nothing.
    'Picc',
    'TM',
    // "X" alone or first is not Cross.
    'X',
    'X Gates',
  ])('%j is still not found', async (q) => {
    expect(await gazetteer.geocode(q)).toMatchObject({ ok: false, reason: 'not_found' });
  });
});

describe('a county or region after a town picks the town of the name there', () => {
  // Real-world points (not read from our data files). Each was another place: Ashford, Kent
  // (98 km off); Inverness, as "Highland" (141 km); St Ives, Cornwall (444 km); Wellington,
  // Telford (198 km).
  it.each([
    // Spelthorne is in Surrey, though its postal county (the data's) is Middlesex.
    ['Ashford, Surrey', 'place', 'Ashford', [51.434, -0.464], 3, 'E07000213'],
    ['Ashford, Surrey, UK', 'place', 'Ashford', [51.434, -0.464], 3, 'E07000213'],
    ['Ashford, Middlesex', 'place', 'Ashford', [51.434, -0.464], 3, 'E07000213'],
    ['Ashford, Kent', 'place', 'Ashford', [51.1465, 0.8717], 3, 'E07000105'],
    // Oban is in Argyll and Bute; "Highlands" is the loose region around it.
    ['Oban, Highlands', 'place', 'Oban', [56.415, -5.472], 3, 'S12000035'],
    ['Oban, Highland', 'place', 'Oban', [56.415, -5.472], 3, 'S12000035'],
    // Post towns (PE27, TA21) that the town list lacks: the point is their district's.
    ['St Ives, Cambridgeshire', 'place', 'St Ives', [52.334, -0.075], 3, 'E07000011'],
    ['St Ives, Cambs', 'place', 'St Ives', [52.334, -0.075], 3, 'E07000011'],
    ['Saint Ives, Cambridgeshire, UK', 'place', 'St Ives', [52.334, -0.075], 3, 'E07000011'],
    ['St Ives, Huntingdonshire', 'place', 'St Ives', [52.334, -0.075], 3, 'E07000011'],
    ['St Ives, Cornwall', 'place', 'St Ives', [50.2083, -5.4906], 3, 'E06000052'],
    ['Wellington, Somerset', 'place', 'Wellington', [50.978, -3.2243], 3, 'E06000066'],
    ['Wellington, Somerset, England', 'place', 'Wellington', [50.978, -3.2243], 3, 'E06000066'],
    ['Wellington, Shropshire', 'place', 'Wellington', [52.7001, -2.5157], 3, 'E06000020'],
    ['Wellington, Herefordshire', 'place', 'Wellington', [52.1313, -2.7385], 3, 'E06000019'],
  ] as const)('%j is the %s %j', async (q, kind, name, at, km, council) => {
    await expectPlace(q, { kind, name, council }, at, km);
  });

  it('keeps a borough or county around a city where in the city it is', async () => {
    // Not the city's centre as a place, as a place just outside a region would be.
    expect(await gazetteer.geocode('London, Kensington and Chelsea')).toMatchObject({
      ok: true,
      place: { kind: 'address', localAuthorityCode: 'E09000020' },
    });
    // Nor a district of the city's post town in the council named (G77, BS41).
    for (const [q, council] of [
      ['Glasgow, East Renfrewshire', 'S12000049'],
      ['Bristol, Somerset', 'E06000023'],
    ] as const) {
      expect(await gazetteer.geocode(q), q).toMatchObject({ ok: true, place: { localAuthorityCode: council } });
    }
    // A station known by a shortened name is no town of the name near the county.
    const brum = await gazetteer.geocode('Birmingham, Leicestershire');
    expect(brum.ok && brum.place.kind).not.toBe('station');
  });

  it('needs the post-town file for post towns, and works without it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazetteer-'));
    try {
      for (const f of readdirSync(DEFAULT_DATA_DIR)) {
        if (f !== 'uk-postcode-district-post-towns.csv') copyFileSync(join(DEFAULT_DATA_DIR, f), join(dir, f));
      }
      const bare = createGazetteer(dir);
      const r = bare.geocodeSync('Wellington, Somerset');
      expect(r.ok && r.place.postcodeDistrict).not.toBe('TA21');
      expect(bare.geocodeSync('Oban, Highlands')).toMatchObject({ ok: true, place: { name: 'Oban' } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a post town alone, or the town list's town of its postal name", () => {
  // Real-world points (not read from our data files). Each was not found (Newark and
  // Montgomery outside the UK: Newark Liberty, Montgomery Regional in Alabama).
  it.each([
    ['Port Isaac', 'Port Isaac', [50.593, -4.829], 3, 'E06000052'],
    ['Boscastle', 'Boscastle', [50.69, -4.692], 3, 'E06000052'],
    ['Fort Augustus', 'Fort Augustus', [57.1448, -4.6815], 3, 'S12000017'],
    ['Dunkeld', 'Dunkeld', [56.565, -3.585], 3, 'S12000048'],
    ['Montgomery', 'Montgomery', [52.56, -3.149], 3, 'W06000023'],
    ['Inveraray', 'Inveraray', [56.2311, -5.0735], 6, 'S12000035'],
    ['Isle of Tiree', 'Isle of Tiree', [56.505, -6.88], 10, 'S12000035'],
    ['Hinton St. George', 'Hinton St George', [50.9095, -2.8285], 3, 'E06000066'],
    ['Port Isaac town centre', 'Port Isaac', [50.593, -4.829], 3, 'E06000052'],
    // Its GeoNames point (Wimborne Minster) is in Poole's council; BH21 is Dorset's.
    ['Wimborne', 'Wimborne', [50.8, -1.98], 3, 'E06000059'],
    // The town list has these under another name, with a better point than their districts'.
    ['Staines-upon-Thames', 'Staines', [51.434, -0.511], 3, 'E07000213'],
    ['Staines upon Thames', 'Staines', [51.434, -0.511], 3, 'E07000213'],
    ['Newark', 'Newark on Trent', [53.076, -0.809], 3, 'E07000175'],
    ['Malvern', 'Great Malvern', [52.111, -2.325], 3, 'E07000235'],
    ['Dereham', 'East Dereham', [52.681, 0.939], 3, 'E07000143'],
    ['Dunmow', 'Great Dunmow', [51.873, 0.362], 3, 'E07000077'],
    ['St. Columb', 'Saint Columb Major', [50.434, -4.94], 3, 'E06000052'],
  ] as const)('%j is the place %j', async (q, name, at, km, council) => {
    for (const worldwide of [false, true])
      await expectPlace(q, { kind: 'place', name, council }, at, km, { worldwide });
  });

  it('beats a guess far off, not a guess at the town spelt another way', async () => {
    // Fuzzy matches: Aberdour (Fife, 159 km off) and Hayes (London).
    expect(await gazetteer.geocode('Aberlour')).toMatchObject({ ok: true, place: { name: 'Aberlour', kind: 'place' } });
    expect(await gazetteer.geocode('Hawes')).toMatchObject({
      ok: true,
      place: { name: 'Hawes', postcodeDistrict: 'DL8' },
    });
    // Clunderwen station is in the village the post town Clynderwen (SA66) spells so.
    expect(await gazetteer.geocode('Clynderwen')).toMatchObject({ ok: true, place: { kind: 'station', crs: 'CUW' } });
  });

  it('never overrides what the gazetteer finds', async () => {
    // Wellington (TA21) and St Ives (PE27) are post towns too; alone they stay the town list's.
    expect(await gazetteer.geocode('Wellington')).toMatchObject({
      ok: true,
      place: { localAuthorityCode: 'E06000020' },
    });
    expect(await gazetteer.geocode('St Ives')).toMatchObject({ ok: true, place: { localAuthorityCode: 'E06000052' } });
    expect(await gazetteer.geocode('Achnasheen')).toMatchObject({ ok: true, place: { kind: 'station' } });
    // Nor is it a station or an airport.
    expect(await gazetteer.geocode('Port Isaac station')).toMatchObject({ ok: false, reason: 'not_found' });
    expect(await gazetteer.geocode('Montgomery airport')).toMatchObject({ ok: false, reason: 'outside_uk' });
  });

  it('is none alone where its districts lie far apart, unless a qualifier decides', async () => {
    // IV41–IV56 reach 60 km and more across the island.
    expect(await gazetteer.geocode('Isle of Skye')).toMatchObject({ ok: false, reason: 'not_found' });
    const dir = mkdtempSync(join(tmpdir(), 'gazetteer-'));
    try {
      for (const f of readdirSync(DEFAULT_DATA_DIR)) copyFileSync(join(DEFAULT_DATA_DIR, f), join(dir, f));
      // A made-up post town of two districts 570 km apart: Port Isaac's and Kyle's.
      const file = join(dir, 'uk-postcode-district-post-towns.csv');
      writeFileSync(
        file,
        readFileSync(file, 'utf8')
          .replace('PL29,PL,Port Isaac,', 'PL29,PL,Port Isaac; Quirkton,')
          .replace('IV40,IV,Kyle,', 'IV40,IV,Kyle; Quirkton,'),
      );
      const two = createGazetteer(dir);
      expect(two.geocodeSync('Quirkton')).toMatchObject({ ok: false, reason: 'not_found' });
      expect(two.geocodeSync('Quirkton, Cornwall')).toMatchObject({ ok: true, place: { postcodeDistrict: 'PL29' } });
      expect(two.geocodeSync('Port Isaac')).toMatchObject({ ok: true, place: { postcodeDistrict: 'PL29' } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is the place of an address in it', async () => {
    // Were High Street station in Glasgow, Ashford in Kent and (Newark Liberty) outside the UK.
    for (const [q, at, council] of [
      ['High Street, Staines-upon-Thames', [51.434, -0.511], 'E07000213'],
      ['High Street, Port Isaac', [50.593, -4.829], 'E06000052'],
      ['Fore Street, Port Isaac, Cornwall', [50.593, -4.829], 'E06000052'],
      ['12 Castle Gate, Newark', [53.076, -0.809], 'E07000175'],
      ['12 High Street, Fort Augustus', [57.1448, -4.6815], 'S12000017'],
    ] as const) {
      const r = await gazetteer.geocode(q);
      expect(r.ok && { kind: r.place.kind, name: r.place.name, council: r.place.localAuthorityCode }, q).toEqual({
        kind: 'address',
        name: q,
        council,
      });
      if (r.ok) expect(haversineMeters(r.place, { lat: at[0], lng: at[1] }) / 1000, q).toBeLessThan(3);
    }
    // A town qualified by the post town's name is the one there (Ashford, Surrey: Spelthorne).
    expect(await gazetteer.geocode('Ashford, Staines-upon-Thames')).toMatchObject({
      ok: true,
      place: { kind: 'place', name: 'Ashford', localAuthorityCode: 'E07000213' },
    });
  });
});

describe('behaviour', () => {
  it('is deterministic and keeps the query as sent', async () => {
    const a = await gazetteer.geocode(' Newport, Wales ');
    const b = createGazetteer().geocodeSync(' Newport, Wales ');
    expect(a).toEqual(b);
    expect(a.ok && a.place.query).toBe(' Newport, Wales ');
  });

  it('prefers exact names to fuzzy ones, and the kind the text asks for', async () => {
    // "Leeds" is a town and a station; "Leeds station" the station.
    const town = await gazetteer.geocode('Leeds');
    expect(town.ok && town.place.kind).toBe('place');
    const st = await gazetteer.geocode('Leeds station');
    expect(st.ok && st.place.kind).toBe('station');
    // "Gatwick Airport" is a station's name too; the text says airport.
    const ap = await gazetteer.geocode('Gatwick Airport');
    expect(ap.ok && ap.place).toMatchObject({ kind: 'airport', iata: 'LGW' });
  });

  it('shares one default gazetteer', () => {
    expect(defaultGazetteer()).toBe(defaultGazetteer());
  });

  it('exposes the nearest district lookup and districts by code', () => {
    expect(gazetteer.nearestDistrict(53.4774, -2.2309)?.district.district).toBe('M1');
    expect(gazetteer.district('sw1a')?.localAuthorityCode).toBe('E09000033');
    expect(gazetteer.stats.records).toBeGreaterThan(13_000);
  });

  it('loads from an explicit data directory', async () => {
    const other = createGazetteer(new URL('../data', import.meta.url).pathname);
    expect(await other.geocode('KGX')).toEqual(await gazetteer.geocode('KGX'));
  });
});

describe('repeated queries', () => {
  it('answers a repeated query the same, whatever a caller did to an earlier answer', () => {
    const fresh = createGazetteer();
    const first = fresh.geocodeSync('Manchester Airport');
    if (!first.ok) throw new Error('Manchester Airport not found');
    const copy = { ...first.place };
    first.place.lat = 0;
    first.place.name = 'changed by a caller';
    expect(fresh.geocodeSync('Manchester Airport')).toEqual({ ok: true, place: copy });
    // The worldwide flag is part of the question: a place abroad is refused without it, cached or not.
    expect(fresh.geocodeSync('Paris CDG', { worldwide: true }).ok).toBe(true);
    expect(fresh.geocodeSync('Paris CDG').ok).toBe(false);
    expect(fresh.geocodeSync('Paris CDG', { worldwide: true }).ok).toBe(true);
  });
});
