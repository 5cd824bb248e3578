/**
 * The offline gazetteer: UK postcodes, railway and TfL stations, airports (UK, and worldwide
 * on request) and towns, from the open data files in data/ (see data/NOTICE.md for sources and
 * licences). Everything is loaded and indexed once, synchronously, when the gazetteer is
 * created (about 0.3 s); each geocode afterwards is in memory, does no I/O and takes tens of
 * microseconds (a few hundred when it falls back to fuzzy matching).
 *
 * How a query is resolved, in order:
 *  1. a full postcode anywhere in the text ("SW1A 2AA", "sw1a2aa", "… London SW1A 2AA");
 *  2. an outward code on its own ("M1", "sw1a", "W1": sectors such as W1 are merged from W1A…W1W);
 *  3. a name: exact on normalised text, then a 3-letter CRS or IATA code, then fuzzy
 *     (Damerau-Levenshtein ≤ 1 for names of 5–11 characters, ≤ 2 from 12, none below 5, and
 *     the first letter must match; see text.ts);
 *     words such as "station", "airport", "terminal 5", "town centre" say which kind is wanted;
 *     a name that names nothing as written is read with a last "St" as Street and an "X" as
 *     Cross when that is a station's name ("Liverpool Lime St", "Kings X"; not "Lime St,
 *     Liverpool", a street in its town: see keyCands), and big stations have a few short
 *     forms ("Manchester Picc", "Bristol TM": see STATION_SHORT_FORMS);
 *     text after a comma (or in brackets) qualifies the name: a nation, county, council, post
 *     town, outward code or a nearby town; a county or council that no place of the name is in
 *     picks one just outside it ("Ashford, Surrey"), else a post town of the name in it
 *     ("Wellington, Somerset", a post town our town list lacks: see postTownPlace); one that
 *     names a region abroad and nothing here (a country, a US state, "NJ") puts the name abroad
 *     ("Newark, NJ": see FOREIGN_REGIONS);
 *     a name that nothing finds exactly is a post town of the name, alone, when its districts
 *     lie together ("Port Isaac", "Fort Augustus": see postTownPoints);
 *  4. an address: the rightmost part that names a town, station, airport, outward code or post
 *     town is the context, and a station named earlier in the text near that context refines
 *     the point.
 * Ranking for names: the kind the text asks for, then exact before fuzzy, UK before abroad,
 * then a class (hand-written alias 0, town of 20,000+ people 10, station or airport by its own
 * name 20, derived names 30, smaller town 40, neighbourhood 50, foreign city name 60), then
 * importance (population; rail before TfL; major airports first).
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readCsvRecords } from './csv.ts';
import {
  createDistrictLocator,
  type District,
  type DistrictLocator,
  loadDistricts,
  type NearestDistrict,
} from './districts.ts';
import { haversineMeters } from './route-estimate.ts';
import {
  createFuzzyIndex,
  damerauLevenshtein,
  findPostcode,
  fuzzyBudget,
  normalizeName,
  OUTWARD_RE,
  outwardArea,
  tokensOf,
} from './text.ts';
import { type GeocodeOptions, type GeocodeResult, type Geocoder, type Place, WORLDWIDE_HINT } from './types.ts';

export type { District, NearestDistrict } from './districts.ts';

/** <repo>/data, found from this module's own location. */
/** Distinct query texts whose results the gazetteer keeps (a few MB at most). */
const CACHE_SIZE = 20_000;

export const DEFAULT_DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'data');

// ---------------------------------------------------------------------------------------------
// Hand-written tables

/**
 * Airport names people use that the OpenFlights names do not give. They outrank towns of the
 * same name: "Luton" alone is the airport (as people booking a taxi mean it); "Luton town
 * centre" asks for the town.
 */
const AIRPORT_ALIASES: Record<string, string> = {
  heathrow: 'LHR',
  'london heathrow': 'LHR',
  'heathrow airport': 'LHR',
  gatwick: 'LGW',
  'london gatwick': 'LGW',
  'gatwick airport': 'LGW',
  stansted: 'STN',
  'london stansted': 'STN',
  'stansted airport': 'STN',
  luton: 'LTN',
  'london luton': 'LTN',
  'luton airport': 'LTN',
  'london city': 'LCY',
  'city airport': 'LCY',
  'london city airport': 'LCY',
  'london southend': 'SEN',
  'southend airport': 'SEN',
  ringway: 'MAN',
  'john lennon': 'LPL',
  'liverpool airport': 'LPL',
  'east midlands': 'EMA',
  'george best': 'BHD',
  'belfast city': 'BHD',
  'belfast city airport': 'BHD',
  aldergrove: 'BFS',
  'belfast international': 'BFS',
  'belfast airport': 'BFS',
  prestwick: 'PIK',
  'glasgow airport': 'GLA',
  'edinburgh airport': 'EDI',
  'cardiff airport': 'CWL',
  teesside: 'MME',
  'teesside airport': 'MME',
  // Its own name since 2017 (the data has its older "Newquay Cornwall Airport").
  'cornwall airport newquay': 'NQY',
  'cornwall airport': 'NQY',
};

/**
 * The main UK passenger airports, roughly in order of passenger numbers; they rank first among
 * airports sharing a name, and their code beats a clashing CRS code of a minor station.
 */
const MAJOR_UK_AIRPORTS = [
  'LHR',
  'LGW',
  'MAN',
  'STN',
  'LTN',
  'EDI',
  'BHX',
  'GLA',
  'BRS',
  'BFS',
  'NCL',
  'LPL',
  'EMA',
  'LBA',
  'LCY',
  'ABZ',
  'BHD',
  'SEN',
  'CWL',
  'SOU',
  'EXT',
  'INV',
  'BOH',
  'NWI',
  'MME',
  'PIK',
  'NQY',
  'LDY',
];

/**
 * 3-letter codes where the CRS code of a city's main station wins over the IATA code of its
 * airport when nothing in the text says "airport" ("MAN" is Manchester Piccadilly; "MAN
 * airport" is the airport). Every other clash between a major UK airport and a station goes
 * to the airport (LGW, STN, BRS, SEN, …); clashes with minor or foreign airports go to the
 * station (e.g. BCN is Branchton; "BCN airport" is Barcelona).
 */
const CRS_WINS = new Set(['MAN', 'SOU', 'NCL', 'INV']);

/**
 * Town names people shorten, and post towns (their postal names) that the town list has under
 * another name: "Newark" was Newark Liberty airport (outside the UK), "Malvern" and "Dereham"
 * nothing, and "High Street, Staines-upon-Thames" High Street station in Glasgow. The town
 * list's record has a better point and a population; post towns it has under no name are
 * found by their districts instead (see postTownPoints).
 */
const TOWN_ALIASES: Record<string, string> = {
  hull: 'Kingston upon Hull',
  newcastle: 'Newcastle upon Tyne',
  kingston: 'Kingston upon Thames',
  stoke: 'Stoke-on-Trent',
  southend: 'Southend-on-Sea',
  westminster: 'City of Westminster',
  'tunbridge wells': 'Royal Tunbridge Wells',
  londonderry: 'Derry',
  // Post towns (TW18–19, NG22–24, NR19–20, WR13–14, EX38, CM6–7, CT7–9, CM5, EN1–3, TR9).
  // Staines was renamed Staines-upon-Thames in 2012; GeoNames keeps the old name. Not
  // "Wimborne" (BH21): GeoNames' Wimborne Minster lies about 2 km south of the town, nearest
  // BH18 and in Bournemouth, Christchurch and Poole's council, where the town is Dorset's; its
  // district puts it right (postTownPoints).
  'staines upon thames': 'Staines',
  newark: 'Newark on Trent',
  dereham: 'East Dereham',
  malvern: 'Great Malvern',
  torrington: 'Great Torrington',
  dunmow: 'Great Dunmow',
  birchington: 'Birchington-on-Sea',
  ongar: 'Chipping Ongar',
  enfield: 'Enfield Town',
  'st columb': 'Saint Columb Major',
};

/** Station names people shorten. */
const STATION_ALIASES: Record<string, string> = {
  waverley: 'EDB',
  'temple meads': 'BRI',
  'new street': 'BHM',
  'lime street': 'LIV',
  'kings cross st pancras': 'KGX',
  // The name people use for a station whose official name is the town's.
  'newcastle central': 'NCL',
};

/**
 * Short forms of big stations' names, as tickets, departure boards and regular travellers
 * write them ("BRISTOL T M" is on tickets), each naming one station and nothing else: no
 * other station, town or street of note. Keep this short: the general abbreviations, "St" for
 * Street at the end of a name and "X" for Cross, are read by rule (see expandAbbreviations in
 * createGazetteer), so "Liverpool Lime St", "Glasgow Queen St" and "Kings X" need no entry,
 * and "B'ham New St" needs only "bham new street". "Picc" and "TM" alone are not here:
 * Piccadilly Circus, and nothing.
 */
const STATION_SHORT_FORMS: Record<string, string> = {
  'manchester picc': 'MAN',
  'bristol tm': 'BRI',
  'bristol t m': 'BRI',
  // Birmingham, as "B'ham" (normalised "bham") and "Brum"; "… New St" by the St rule.
  'bham new street': 'BHM',
  'brum new street': 'BHM',
};

/** "<city> station" for cities whose main station has another name (used only with "station"). */
const MAIN_STATIONS: Record<string, string> = {
  manchester: 'MAN',
  birmingham: 'BHM',
  glasgow: 'GLC',
  edinburgh: 'EDB',
  liverpool: 'LIV',
  bristol: 'BRI',
  cardiff: 'CDF',
  southampton: 'SOU',
  exeter: 'EXD',
  portsmouth: 'PMS',
  heathrow: 'HXX',
  gatwick: 'GTW',
  stansted: 'SSD',
};

/**
 * Names after which a bare "North" or "South" is the terminal: people say "Gatwick North" for
 * the North Terminal. Only Gatwick names its terminals so, and only right after its name (or
 * "Gatwick Airport") is the word a terminal: "North" alone, "Shields North" or "Gatwick North
 * Yorkshire" are not.
 */
const NORTH_SOUTH_TERMINAL_AIRPORTS = new Set(['gatwick', 'lgw']);

/**
 * Terminal points. Heathrow's are the TfL interchange hubs at each terminal
 * (london-tfl-stations.csv: HUBH13 Terminals 2 & 3, HUBHX4, HUBHX5); Gatwick South is its
 * railway station (GTW, inside the South Terminal); Gatwick North is approximate (the North
 * Terminal building, about 1.2 km north-west of the South Terminal). Other terminals use the
 * airport point. Heathrow T1 closed in 2015 and gets the airport point.
 */
const TERMINALS: Record<string, Record<string, { tfl?: string; crs?: string; lat?: number; lng?: number }>> = {
  LHR: { T2: { tfl: 'HUBH13' }, T3: { tfl: 'HUBH13' }, T4: { tfl: 'HUBHX4' }, T5: { tfl: 'HUBHX5' } },
  LGW: { South: { crs: 'GTW' }, North: { lat: 51.162, lng: -0.177 } },
};

const STATION_WORDS = new Set([
  'station',
  'stn',
  'railway',
  'rail',
  'rly',
  'train',
  'trains',
  'tube',
  'underground',
  'dlr',
  'overground',
]);
const AIRPORT_WORDS = new Set([
  'airport',
  'airpt',
  'aeroport',
  'terminal',
  'terminals',
  'term',
  'departures',
  'arrivals',
  'aerodrome',
  'airfield',
]);
/** Airport words that are never part of an airport's name: where at the airport, not which airport. */
const NOT_IN_AIRPORT_NAMES = new Set([
  'terminal',
  'terminals',
  'term',
  'departures',
  'arrivals',
  'departure',
  'arrival',
]);
/** Words dropped from airport names to make the short form ("London Heathrow"). */
const GENERIC_AIRPORT_WORDS = new Set(['airport', 'international', 'intl', 'aerodrome', 'airfield', 'airstrip']);
const PLACE_SUFFIXES = [
  ['town', 'centre'],
  ['city', 'centre'],
  ['town', 'center'],
  ['city', 'center'],
  ['centre'],
  ['center'],
  ['town'],
];
/** Intent words corrected when misspelt by one edit ("staion", "airprot", "termnal"). */
const INTENT_SPELLINGS = [
  'station',
  'airport',
  'terminal',
  'terminals',
  'railway',
  'underground',
  'arrivals',
  'departures',
];
/** A name followed by one of these is part of a street name ("Victoria Road"), not a place. */
const STREET_WORDS = new Set([
  'road',
  'rd',
  'street',
  'st',
  'lane',
  'ln',
  'avenue',
  'ave',
  'drive',
  'dr',
  'close',
  'way',
  'crescent',
  'terrace',
  'grove',
  'gardens',
  'place',
  'court',
  'mews',
  'walk',
  'row',
  'parade',
  'square',
  'rise',
  'vale',
  'hill',
  'park',
  'green',
  'gate',
  'yard',
  'wharf',
  'embankment',
  'broadway',
]);
const HOUSE_WORDS = new Set(['flat', 'apartment', 'apt', 'unit', 'suite', 'floor', 'no', 'number', 'house']);

const ALL_NATIONS = ['England', 'Scotland', 'Wales', 'Northern Ireland'];
const NATION_ALIASES: Record<string, string[]> = {
  england: ['England'],
  scotland: ['Scotland'],
  wales: ['Wales'],
  cymru: ['Wales'],
  'south wales': ['Wales'],
  'north wales': ['Wales'],
  'mid wales': ['Wales'],
  'west wales': ['Wales'],
  'northern ireland': ['Northern Ireland'],
  ni: ['Northern Ireland'],
  'n ireland': ['Northern Ireland'],
  uk: ALL_NATIONS,
  'united kingdom': ALL_NATIONS,
  gb: ['England', 'Scotland', 'Wales'],
  'great britain': ['England', 'Scotland', 'Wales'],
  britain: ['England', 'Scotland', 'Wales'],
};
const COUNTY_ABBREVIATIONS: Record<string, string> = {
  herts: 'hertfordshire',
  hants: 'hampshire',
  beds: 'bedfordshire',
  bucks: 'buckinghamshire',
  berks: 'berkshire',
  oxon: 'oxfordshire',
  glos: 'gloucestershire',
  lancs: 'lancashire',
  notts: 'nottinghamshire',
  wilts: 'wiltshire',
  worcs: 'worcestershire',
  yorks: 'yorkshire',
  cambs: 'cambridgeshire',
  northants: 'northamptonshire',
  leics: 'leicestershire',
  lincs: 'lincolnshire',
  staffs: 'staffordshire',
  warks: 'warwickshire',
  middx: 'middlesex',
  iow: 'isle of wight',
  // The Highland council area, as people name it ("Fort William, Highlands" was Inverness,
  // 91 km off: the qualifier matched nothing and the address took "Highland" as its place).
  highlands: 'highland',
};
/**
 * Counties people name that no postal address does (the data's county is the former postal
 * county: Bury and Wigan are "Lancashire", Stockport "Cheshire"), by the councils they are made
 * of. Unmatched, "Bury, Greater Manchester" was an address in Manchester, 13 km off.
 */
const METROPOLITAN_COUNTIES: Record<string, string[]> = {
  'greater manchester': [
    'Bolton',
    'Bury',
    'Manchester',
    'Oldham',
    'Rochdale',
    'Salford',
    'Stockport',
    'Tameside',
    'Trafford',
    'Wigan',
  ],
};
/** Crown dependencies: their postcodes look British but they are not in the UK (nor our data). */
const CROWN_DEPENDENCY_AREAS: Record<string, string> = { GY: 'Guernsey', JE: 'Jersey', IM: 'the Isle of Man' };

/**
 * Qualifiers that name a region abroad, by country code (as airports.csv writes it): US states
 * (and DC), Canadian provinces and territories and Australian states and territories, each by
 * its postal code and its name ("CODE Name", `|` between), and names of countries that
 * airports.csv does not use (the names it does use, "France", "Ireland", are added from the data:
 * see foreignRegions). Unmatched, such a qualifier was ignored and the name before it taken as a
 * UK town or street: "Newark, NJ" was Newark-on-Trent, "Boston, Massachusetts" Boston in
 * Lincolnshire. One counts only when it names nothing in the UK ("Washington", "Victoria" and
 * "Holland", South Holland's, stay the UK's) and no place of the name matches a qualifier: see foreignRegionOf,
 * which also says when a code that is a UK postcode area or a word counts (FOREIGN_CODE_WORDS).
 * "NE" is not Nebraska: to people here it is the North East.
 */
const FOREIGN_REGIONS: Record<string, string> = {
  US:
    'AL Alabama|AK Alaska|AZ Arizona|AR Arkansas|CA California|CO Colorado|CT Connecticut|DE Delaware|' +
    'DC District of Columbia|DC Washington DC|FL Florida|GA Georgia|HI Hawaii|ID Idaho|IL Illinois|' +
    'IN Indiana|IA Iowa|KS Kansas|KY Kentucky|LA Louisiana|ME Maine|MD Maryland|MA Massachusetts|' +
    'MI Michigan|MN Minnesota|MS Mississippi|MO Missouri|MT Montana|- Nebraska|NV Nevada|' +
    'NH New Hampshire|NJ New Jersey|NM New Mexico|NY New York|NC North Carolina|ND North Dakota|OH Ohio|' +
    'OK Oklahoma|OR Oregon|PA Pennsylvania|RI Rhode Island|SC South Carolina|SD South Dakota|' +
    'TN Tennessee|TX Texas|UT Utah|VT Vermont|VA Virginia|WA Washington|WV West Virginia|WI Wisconsin|' +
    'WY Wyoming|- USA|- United States of America|- America',
  CA:
    'AB Alberta|BC British Columbia|MB Manitoba|NB New Brunswick|NL Newfoundland and Labrador|' +
    'NL Newfoundland|NS Nova Scotia|NT Northwest Territories|NU Nunavut|ON Ontario|PE Prince Edward Island|' +
    'QC Quebec|SK Saskatchewan|YT Yukon',
  AU:
    'NSW New South Wales|VIC Victoria|QLD Queensland|SA South Australia|WA Western Australia|' +
    'TAS Tasmania|NT Northern Territory|ACT Australian Capital Territory',
  IE: '- Republic of Ireland|- Eire',
  NL: '- The Netherlands',
};
/**
 * Codes in FOREIGN_REGIONS that are also words people write after a comma; like those that are
 * UK postcode areas ("CA", "PA", "ME"), they count only beside a name we know abroad there.
 */
const FOREIGN_CODE_WORDS = new Set(['in', 'or', 'me', 'hi', 'ok', 'oh', 'id', 'on', 'nb', 'nt', 'act']);

const BIG_TOWN = 20_000;
/**
 * How near a county or council a place it is not in may be for the qualifier to pick it, as a
 * loose one (half a match): people name the county a place is administratively in, where the
 * data knows its postal county ("Ashford, Surrey": Spelthorne is in Surrey, TW15's postal
 * county Middlesex; 6.6 km from the nearest Surrey district centre), or the region around it
 * ("Oban, Highlands": Argyll and Bute, 25 km from the nearest Highland one). Distances are to
 * district centres, which in rural areas lie far inside the boundary.
 */
const LOOSE_REGION_RADIUS = 30_000;
/**
 * How far apart a post town's districts (in one county, or all of them for a post town named
 * alone) may lie for them to be one town.
 */
const POST_TOWN_SPREAD = 25_000;
/** How far from a post town's point (see postTownPoints) a station in an address there may be. */
const POST_TOWN_RADIUS = 8_000;
/**
 * How far a town named in a UK airport's name may be from it for "<town> airport" to be that
 * airport: the main airports named after a city are all nearer it (Cardiff, the farthest, 14.6
 * km); "London Biggin Hill" (23 km) and "Durham Tees Valley" (31 km) are not "London Airport"
 * or "Durham Airport".
 */
const TOWN_AIRPORT_RADIUS = 15_000;
/**
 * How far from a major airport named after no town near it a town may be for the airport to be
 * that town's (see townAirport): Crawley's centre is 3.9 km from Gatwick.
 */
const AIRPORT_TOWN_RADIUS = 5_000;

// ---------------------------------------------------------------------------------------------
// Records and the name index

type Source = 'town' | 'rail' | 'tfl' | 'airport';
type Variant = 'alias' | 'full' | 'derived' | 'city';
type Intent = 'station' | 'airport' | 'place';

interface Rec {
  id: number;
  source: Source;
  kind: 'place' | 'station' | 'airport';
  name: string;
  lat: number;
  lng: number;
  countryCode: string;
  uk: boolean;
  population: number;
  pplx: boolean;
  /** Lower is more important within a source. */
  tier: number;
  crs?: string;
  iata?: string;
  tflId?: string;
  /** For stations: the IATA code of the airport it serves. */
  servesIata?: string;
  /** England / Scotland / Wales / Northern Ireland when the source says. */
  nation?: string;
  /** Normalised texts a qualifier may name: bracketed part of the name, airport city and country. */
  qualifierText: string[];
  /** Airport city and country (display, for messages). */
  city?: string;
  country?: string;
}

interface KeyRef {
  rec: number;
  variant: Variant;
  intentOnly?: Intent;
}

interface Cand {
  rec: Rec;
  variant: Variant;
  distance: number;
}

const VARIANT_ORDER: Record<Variant, number> = { alias: 0, full: 1, derived: 2, city: 3 };

function classScore(rec: Rec, variant: Variant): number {
  if (variant === 'alias') return 0;
  switch (rec.source) {
    case 'town': {
      if (rec.pplx) return 50;
      const big = rec.population >= BIG_TOWN;
      if (variant === 'full') return big ? 10 : 40;
      return big ? 30 : 45;
    }
    case 'rail':
    case 'tfl':
      return variant === 'full' ? 20 : 30;
    case 'airport':
      if (variant === 'city') return 60;
      return variant === 'full' ? 20 : 30;
  }
}

function compareCands(intent: Intent | null) {
  return (a: Cand, b: Cand): number => {
    if (intent) {
      const ia = a.rec.kind === intent ? 0 : 1;
      const ib = b.rec.kind === intent ? 0 : 1;
      if (ia !== ib) return ia - ib;
    }
    return (
      a.distance - b.distance ||
      (a.rec.uk ? 0 : 1) - (b.rec.uk ? 0 : 1) ||
      classScore(a.rec, a.variant) - classScore(b.rec, b.variant) ||
      a.rec.tier - b.rec.tier ||
      a.rec.id - b.rec.id
    );
  };
}

interface Parsed {
  norm: string;
  intent: Intent | null;
  terminal: string | null;
  /** The text without airport words and terminal: "" for "Terminal 5" alone. */
  airportCore: string;
  /** Texts to look up: the whole, and the whole without the intent words. */
  keys: string[];
  /**
   * The whole without where-at-the-airport words (terminal, arrivals), then also without
   * "international": looked up, in turn, only when the whole text is no name at all, so a
   * full name ("Perth International Airport", abroad) is never read as a shorter one.
   */
  fallbackKeys: string[];
  /**
   * A final "St" stays as written, not read as Street of a station's name (see keyCands): set
   * for a name a town or other qualifier follows, without the word station ("Lime St,
   * Liverpool", "Baker St, St Albans" are the streets).
   */
  keepSt?: boolean;
}

function correctIntentWord(t: string): string {
  if (t.length < 6 || INTENT_SPELLINGS.includes(t)) return t;
  for (const w of INTENT_SPELLINGS) {
    if (damerauLevenshtein(t, w, 1) <= 1) return w;
  }
  return t;
}

function parseQuery(norm: string): Parsed {
  const tokens = tokensOf(norm).map(correctIntentWord);
  let terminal: string | null = null;
  /** Where a terminal named without an airport word ("Gatwick North") was read. */
  let terminalAt = -1;
  const airportCore: string[] = [];
  // The text without its terminal ("Manchester Airport" of "Manchester Airport T2"): the
  // airport's own name, where the core without airport words ("Manchester") is the city's;
  // and that without "international" beside "airport" as well.
  const withoutTerminal: string[] = [];
  const withoutGeneric: string[] = [];
  let bareTerminalWord = false;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] ?? '';
    const next = tokens[i + 1];
    if (/^t[1-9]$/.test(t)) {
      terminal = `T${t.slice(1)}`;
      continue;
    }
    if ((t === 'terminal' || t === 'terminals' || t === 'term') && next && /^[1-9]$/.test(next)) {
      terminal = `T${next}`;
      i += 1;
      if (tokens[i + 1] === 'and' && /^[1-9]$/.test(tokens[i + 2] ?? '')) i += 2;
      continue;
    }
    if ((t === 'north' || t === 'south') && (next === 'terminal' || next === 'terminals')) {
      terminal = t === 'north' ? 'North' : 'South';
      i += 1;
      continue;
    }
    if (t === 'terminal' && (next === 'north' || next === 'south')) {
      terminal = next === 'north' ? 'North' : 'South';
      i += 1;
      continue;
    }
    // "Gatwick North", "LGW South", "Gatwick Airport North arrivals": the terminal without the
    // word "terminal", said only of Gatwick, and only at the end or before where at the airport.
    if ((t === 'north' || t === 'south') && (next === undefined || NOT_IN_AIRPORT_NAMES.has(next))) {
      const before = tokens[i - 1] === 'airport' ? tokens[i - 2] : tokens[i - 1];
      if (before !== undefined && NORTH_SOUTH_TERMINAL_AIRPORTS.has(before)) {
        terminal = t === 'north' ? 'North' : 'South';
        terminalAt = i;
        continue;
      }
    }
    // "terminal" with no number names no terminal, and is no part of the airport's name, as
    // "arrivals" and "departures" are not; nor, perhaps, "international" beside "airport"
    // ("Leeds Bradford International Airport" is Leeds Bradford Airport).
    if (NOT_IN_AIRPORT_NAMES.has(t)) bareTerminalWord = true;
    else {
      withoutTerminal.push(t);
      if (!(GENERIC_AIRPORT_WORDS.has(t) && t !== 'airport' && tokens.includes('airport'))) withoutGeneric.push(t);
    }
    if (AIRPORT_WORDS.has(t)) continue;
    airportCore.push(t);
  }
  const stationCore = tokens.filter((t) => !STATION_WORDS.has(t));
  let placeCore = tokens;
  let placeWords = false;
  for (const suffix of PLACE_SUFFIXES) {
    if (tokens.length > suffix.length && suffix.every((w, k) => tokens[tokens.length - suffix.length + k] === w)) {
      placeCore = tokens.slice(0, tokens.length - suffix.length);
      placeWords = true;
      break;
    }
  }
  // An intent word alone ("STN" is Stonehaven's code, "Terminal" a word) is the name itself.
  // With both kinds of word the last one says what is meant: "Gatwick Airport station" is the
  // station, "STN airport" the airport.
  const lastStation = stationCore.length > 0 ? tokens.findLastIndex((t) => STATION_WORDS.has(t)) : -1;
  const lastAirport =
    airportCore.length > 0
      ? Math.max(
          terminalAt,
          tokens.findLastIndex((t) => AIRPORT_WORDS.has(t) || /^t[1-9]$/.test(t)),
        )
      : -1;
  const intent: Intent | null =
    lastStation >= 0 && lastStation > lastAirport
      ? 'station'
      : lastAirport >= 0
        ? 'airport'
        : placeWords
          ? 'place'
          : null;
  const whole = tokens.join(' ');
  const keys = [...new Set([whole, stationCore.join(' '), airportCore.join(' '), placeCore.join(' ')])].filter(
    (k) => k !== '',
  );
  const fallbackKeys = [
    ...new Set([
      ...(terminal !== null || bareTerminalWord ? [withoutTerminal.join(' ')] : []),
      withoutGeneric.join(' '),
    ]),
  ].filter((k) => k !== '' && k !== whole);
  return { norm: whole, intent, terminal, airportCore: airportCore.join(' '), keys, fallbackKeys };
}

function titleCase(s: string): string {
  return s.replace(/\b([a-z])/g, (m) => m.toUpperCase());
}

/** The centre of districts, each weighted by its postcodes. */
function districtCentre(ds: readonly District[]): { lat: number; lng: number } {
  const weight = (d: District) => Math.max(1, d.postcodeCount);
  const total = ds.reduce((sum, d) => sum + weight(d), 0);
  return {
    lat: ds.reduce((sum, d) => sum + d.lat * weight(d), 0) / total,
    lng: ds.reduce((sum, d) => sum + d.lng * weight(d), 0) / total,
  };
}

/** Whether districts lie together, as one town's (see POST_TOWN_SPREAD). */
function liesTogether(ds: readonly District[]): boolean {
  return ds.every((a) => ds.every((b) => haversineMeters(a, b) <= POST_TOWN_SPREAD));
}

/** A post town as written in the data, "St." as "St" ("Hinton St. George"). */
function postTownName(written: string): string {
  return written.replace(/\bSt\. /g, 'St ');
}

// ---------------------------------------------------------------------------------------------
// Shared district locators (one per data directory)

const locators = new Map<string, DistrictLocator>();

function districtLocatorFor(dataDir: string): DistrictLocator {
  let loc = locators.get(dataDir);
  if (!loc) {
    loc = createDistrictLocator(loadDistricts(dataDir));
    locators.set(dataDir, loc);
  }
  return loc;
}

/**
 * The postcode district whose centroid is nearest the point (within 60 km), with its local
 * authority. Loads the district file once per data directory. Used by the gazetteer for every
 * non-postcode place and by the map-provider adapter.
 */
export function nearestDistrict(lat: number, lng: number, dataDir = DEFAULT_DATA_DIR): NearestDistrict | null {
  return districtLocatorFor(dataDir).nearest(lat, lng);
}

/**
 * The postcode district and its first post town at a point, for naming a place stored without
 * them ("Manchester M1" on a job card: `pickupArea`'s `lookupDistrict`).
 */
export function postDistrictAt(lat: number, lng: number): { district: string; town: string | null } | null {
  const nd = nearestDistrict(lat, lng);
  return nd ? { district: nd.district.district, town: nd.district.postTowns[0] ?? null } : null;
}

// ---------------------------------------------------------------------------------------------
// The gazetteer

export interface Gazetteer extends Geocoder {
  /** The same as `geocode`, synchronously. */
  geocodeSync(query: string, opts?: GeocodeOptions): GeocodeResult;
  /** Nearest postcode district centroid (within 60 km) to a point. */
  nearestDistrict(lat: number, lng: number): NearestDistrict | null;
  /** A district by outward code (any case). */
  district(code: string): District | undefined;
  /** How many records and distinct names are indexed (for diagnostics and tests). */
  readonly stats: { records: number; names: number };
}

let shared: Gazetteer | undefined;

/** One gazetteer over data/, created on first use and shared by the whole process. */
export function defaultGazetteer(): Gazetteer {
  shared ??= createGazetteer();
  return shared;
}

export function createGazetteer(dataDir: string = DEFAULT_DATA_DIR): Gazetteer {
  const locator = districtLocatorFor(dataDir);
  const recs: Rec[] = [];
  const names = new Map<string, KeyRef[]>();
  const crsIndex = new Map<string, Rec>();
  const iataIndex = new Map<string, Rec>();
  const tflIndex = new Map<string, Rec>();
  const nearestCache = new Map<number, NearestDistrict | null>();

  const addRec = (r: Omit<Rec, 'id'>): Rec => {
    const rec = { ...r, id: recs.length };
    recs.push(rec);
    return rec;
  };
  const addKey = (key: string, rec: Rec, variant: Variant, intentOnly?: Intent) => {
    if (key === '') return;
    const list = names.get(key);
    const ref: KeyRef = intentOnly ? { rec: rec.id, variant, intentOnly } : { rec: rec.id, variant };
    if (!list) {
      names.set(key, [ref]);
      return;
    }
    const same = list.find((r) => r.rec === rec.id && r.intentOnly === intentOnly);
    if (!same) list.push(ref);
    else if (VARIANT_ORDER[variant] < VARIANT_ORDER[same.variant]) same.variant = variant;
  };
  const splitParen = (name: string): { base: string; inner: string } | null => {
    const m = /^(.*?)\s*\(([^)]*)\)\s*(.*)$/.exec(name);
    if (!m) return null;
    return { base: `${m[1] ?? ''} ${m[3] ?? ''}`.trim(), inner: m[2] ?? '' };
  };

  // Towns (GeoNames), sorted by population in the file.
  const townNames = new Set<string>();
  for (const r of readCsvRecords(join(dataDir, 'uk-towns.csv'))) {
    const lat = Number(r.latitude);
    const lng = Number(r.longitude);
    const name = r.name ?? '';
    if (!name || !Number.isFinite(lat) || !Number.isFinite(lng)) continue;
    const population = Number(r.population) || 0;
    const rec = addRec({
      source: 'town',
      kind: 'place',
      name,
      lat,
      lng,
      countryCode: 'GB',
      uk: true,
      population,
      pplx: r.feature_code === 'PPLX',
      tier: -population,
      nation: r.country || undefined,
      qualifierText: [],
    });
    const full = normalizeName(name);
    addKey(full, rec, 'full');
    townNames.add(full);
    const comma = name.indexOf(',');
    if (comma > 0) {
      addKey(normalizeName(name.slice(0, comma)), rec, 'derived');
      rec.qualifierText.push(normalizeName(name.slice(comma + 1)));
    }
  }
  for (const [alias, target] of Object.entries(TOWN_ALIASES)) {
    const rec = recs.find((r) => r.source === 'town' && r.name === target);
    if (rec) addKey(alias, rec, 'alias');
  }

  // National Rail stations.
  for (const r of readCsvRecords(join(dataDir, 'uk-rail-stations.csv'))) {
    const lat = Number(r.latitude);
    const lng = Number(r.longitude);
    const name = r.name ?? '';
    const crs = (r.crs ?? '').toUpperCase();
    if (!name || !crs || !Number.isFinite(lat) || !Number.isFinite(lng)) continue;
    const rec = addRec({
      source: 'rail',
      kind: 'station',
      name,
      lat,
      lng,
      countryCode: 'GB',
      uk: true,
      population: 0,
      pplx: false,
      tier: 0,
      crs,
      servesIata: r.iata_airport_code || undefined,
      nation: r.country ? titleCase(r.country) : undefined,
      qualifierText: [],
    });
    crsIndex.set(crs, rec);
    const full = normalizeName(name);
    addKey(full, rec, 'full');
    const paren = splitParen(name);
    // Stations sharing a name rank by the town they serve: "Newport (South Wales)" before
    // "Newport (Essex)".
    const townNamesake = (names.get(paren ? normalizeName(paren.base) : full) ?? [])
      .map((ref) => recs[ref.rec])
      .filter((t): t is Rec => t?.source === 'town' && haversineMeters(t, rec) <= 10_000);
    rec.tier = -Math.max(0, ...townNamesake.map((t) => t.population));
    if (paren) {
      addKey(normalizeName(paren.base), rec, 'derived');
      rec.qualifierText.push(normalizeName(paren.inner));
    }
    const toks = tokensOf(full);
    if (toks.length > 1 && STATION_WORDS.has(toks[toks.length - 1] ?? '')) {
      addKey(toks.slice(0, -1).join(' '), rec, 'derived');
    }
    // "London Euston" is "Euston" to everyone; not "London Bridge" → "Bridge" or "London Road (…)".
    if (name.startsWith('London ') && !paren) {
      const rest = normalizeName(name.slice(7));
      if (!['bridge', 'fields'].includes(rest)) {
        addKey(rest, rec, 'full');
        if (rest.endsWith(' international')) addKey(rest.slice(0, -' international'.length), rec, 'derived');
      }
    }
    if (full.endsWith(' international')) addKey(full.slice(0, -' international'.length), rec, 'derived');
  }
  for (const [key, crs] of Object.entries(MAIN_STATIONS)) {
    const rec = crsIndex.get(crs);
    if (rec) addKey(key, rec, 'alias', 'station');
  }
  /**
   * Official names that only a station has, the city's name then the station's: London's
   * termini ("London Kings Cross", "London Euston"; not "London Bridge" or "London Fields",
   * a bridge and a park) and the main stations of MAIN_STATIONS ("Manchester Piccadilly").
   * Other station names may be a street's or a neighbourhood's ("Baker Street", "Wimbledon",
   * "Ealing Broadway", "Old Street"). See namedBesidePostcode.
   */
  const cityStationNames = new Map<string, Rec>();
  for (const rec of recs) {
    const norm = normalizeName(rec.name);
    const city = Object.entries(MAIN_STATIONS).find(([, crs]) => crs === rec.crs)?.[0];
    const terminus =
      rec.name.startsWith('London ') && !splitParen(rec.name) && !['bridge', 'fields'].includes(norm.slice(7));
    if (rec.source === 'rail' && (terminus || (city && norm.startsWith(`${city} `)))) cityStationNames.set(norm, rec);
  }
  for (const [key, crs] of [...Object.entries(STATION_ALIASES), ...Object.entries(STATION_SHORT_FORMS)]) {
    const rec = crsIndex.get(crs);
    if (rec) addKey(key, rec, 'alias');
  }

  // TfL stations (Underground, DLR, Overground, Elizabeth line, hubs).
  for (const r of readCsvRecords(join(dataDir, 'london-tfl-stations.csv'))) {
    const lat = Number(r.latitude);
    const lng = Number(r.longitude);
    const id = r.tfl_id ?? '';
    const raw = r.name ?? '';
    if (!raw || !Number.isFinite(lat) || !Number.isFinite(lng)) continue;
    // "Oxford Circus Underground Station" → "Oxford Circus"; a few rows carry a second name
    // after " / " ("Charing Cross Stn / Trafalgar Square"): the first part is the station.
    const first = (raw.split(' / ')[0] ?? raw)
      .replace(/\bStn\b/g, 'Station')
      .replace(/\bRd\b/g, 'Road')
      .replace(/\bTn Ctr\b/g, 'Town Centre');
    const name =
      first.replace(/\s+(?:(?:Underground|DLR|Rail|Overground|Tram)\s+)?(?:Station|Stop)\s*$/i, '').trim() || raw;
    const rec = addRec({
      source: 'tfl',
      kind: 'station',
      name,
      lat,
      lng,
      countryCode: 'GB',
      uk: true,
      population: 0,
      pplx: false,
      tier: id.startsWith('HUB') ? 1 : id.startsWith('910') ? 2 : 3,
      tflId: id,
      servesIata: /^Heathrow\b/.test(name) ? 'LHR' : undefined,
      nation: 'England',
      qualifierText: ['london'],
    });
    tflIndex.set(id, rec);
    const full = normalizeName(name);
    addKey(full, rec, 'full');
    const toks = tokensOf(full);
    if (toks.length > 1 && STATION_WORDS.has(toks[toks.length - 1] ?? '')) {
      addKey(toks.slice(0, -1).join(' '), rec, 'derived');
    }
    const paren = splitParen(name);
    if (paren) addKey(normalizeName(paren.base), rec, 'derived');
    const parts = name.split(' & ');
    if (parts.length === 2 && parts.every((p) => /[A-Za-z]{3}/.test(p) && p.trim().includes(' '))) {
      for (const p of parts) addKey(normalizeName(p), rec, 'derived');
    }
  }

  /**
   * The stations named after each town, National Rail and TfL: every town within 10 km whose
   * name starts the station's ("Harrow-on-the-Hill" and "Harrow & Wealdstone" are both
   * Harrow's), marked when it is the longest such name ("Milton Keynes Central" is named after
   * Milton Keynes, not Milton). See mainStationOf.
   */
  const townStations = new Map<number, Array<{ rec: Rec; longest: boolean }>>();
  for (const rec of recs) {
    if (rec.kind !== 'station') continue;
    const toks = tokensOf(normalizeName(rec.name));
    let longest = true;
    for (let k = toks.length; k >= 1; k--) {
      const town = (names.get(toks.slice(0, k).join(' ')) ?? [])
        .map((ref) => recs[ref.rec])
        .filter((t): t is Rec => t?.source === 'town' && haversineMeters(t, rec) <= 10_000)
        .sort((x, y) => haversineMeters(x, rec) - haversineMeters(y, rec))[0];
      if (!town) continue;
      townStations.set(town.id, [...(townStations.get(town.id) ?? []), { rec, longest }]);
      longest = false;
    }
  }
  /**
   * A town's main railway station: the one of the town's own name ("Stoke-on-Trent" for
   * "Stoke"), else the only station, of either network, named after the town, when within 3
   * km of it ("Bath Spa", "Milton Keynes Central"; Dudley Port, 3.4 km off, is Tipton's). A
   * town with several ("Bristol Temple Meads", "Bristol Parkway"; Harrow-on-the-Hill and
   * Harrow & Wealdstone; Dagenham Dock and Dagenham East) has none here (see MAIN_STATIONS).
   */
  const mainStationOf = (town: Rec): Rec | undefined => {
    const stations = townStations.get(town.id) ?? [];
    const rail = stations
      .filter((s) => s.longest && s.rec.source === 'rail' && haversineMeters(s.rec, town) <= 3_000)
      .map((s) => s.rec);
    const own = rail.find((s) => normalizeName(s.name) === normalizeName(town.name));
    return own ?? (new Set(stations.map((s) => normalizeName(s.rec.name))).size === 1 ? rail[0] : undefined);
  };

  /** The UK civil airports whose names name each town, at any distance (see townAirport). */
  const airportsNaming = new Map<number, Rec[]>();
  // Airports (OpenFlights), worldwide.
  for (const r of readCsvRecords(join(dataDir, 'airports.csv'))) {
    const lat = Number(r.lat);
    const lng = Number(r.lng);
    const iata = (r.iata ?? '').toUpperCase();
    const name = r.name ?? '';
    if (!iata || !name || !Number.isFinite(lat) || !Number.isFinite(lng)) continue;
    const countryCode = r.country_code || '';
    const uk = countryCode === 'GB';
    const major = MAJOR_UK_AIRPORTS.indexOf(iata);
    const military = /^(RAF|RNAS)\b/.test(name);
    const tier = uk
      ? major >= 0
        ? major
        : military
          ? 150
          : 100
      : /international/i.test(name)
        ? 200
        : normalizeName(name) === `${normalizeName(r.city ?? '')} airport`
          ? 250
          : 300;
    const city = r.city ?? '';
    const cityN = normalizeName(city);
    const rec = addRec({
      source: 'airport',
      kind: 'airport',
      name,
      lat,
      lng,
      countryCode,
      uk,
      population: 0,
      pplx: false,
      tier,
      iata,
      qualifierText: [cityN, normalizeName(r.country ?? ''), countryCode.toLowerCase()].filter(Boolean),
      city,
      country: r.country ?? '',
    });
    iataIndex.set(iata, rec);
    const full = normalizeName(name);
    addKey(full, rec, 'full');
    const stripped = tokensOf(full)
      .filter((t) => !GENERIC_AIRPORT_WORDS.has(t))
      .join(' ');
    // "London Heathrow" yes; "Wick" (Wick Airport) no: a bare town name stays the town's.
    if (stripped !== '' && stripped !== full && stripped.includes(' ') && !townNames.has(stripped)) {
      addKey(stripped, rec, 'derived');
    }
    if (cityN !== '') {
      if (stripped !== '' && !stripped.startsWith(cityN)) addKey(`${cityN} ${stripped}`, rec, 'derived');
      addKey(`${cityN} airport`, rec, 'derived');
      if (!uk) addKey(cityN, rec, 'city');
    }
    // "<town> airport" for every town the name itself names, when the town is the airport's
    // own (within TOWN_AIRPORT_RADIUS). The data's city is not always that town: misspelt
    // ("Newquai", so "Newquay Airport arrivals" was the town of Newquay, 6 km from its
    // airport), the city served ("Aberdeen" for Dyce, "Londonderry" for City of Derry) or the
    // first of two ("Leeds" for Leeds Bradford). A town far off ("London Biggin Hill", "Durham
    // Tees Valley") gives no key.
    if (uk) {
      const words = tokensOf(stripped);
      for (let a = 0; a < words.length; a++) {
        for (let b = a + 1; b <= words.length; b++) {
          const town = words.slice(a, b).join(' ');
          const namesakes = (names.get(town) ?? []).map((ref) => recs[ref.rec]).filter((t) => t?.source === 'town');
          const near = namesakes.some((t) => t !== undefined && haversineMeters(t, rec) <= TOWN_AIRPORT_RADIUS);
          if (near) addKey(`${town} airport`, rec, 'derived');
          if (!military)
            for (const t of namesakes) if (t) airportsNaming.set(t.id, [...(airportsNaming.get(t.id) ?? []), rec]);
        }
      }
    }
  }
  for (const [alias, code] of Object.entries(AIRPORT_ALIASES)) {
    const rec = iataIndex.get(code);
    if (rec) addKey(alias, rec, 'alias');
  }

  // Terminal points.
  const terminalPoints = new Map<string, { lat: number; lng: number }>();
  for (const [iata, terms] of Object.entries(TERMINALS)) {
    for (const [term, src] of Object.entries(terms)) {
      const rec = src.tfl ? tflIndex.get(src.tfl) : src.crs ? crsIndex.get(src.crs) : undefined;
      const pt = rec ?? (src.lat !== undefined && src.lng !== undefined ? { lat: src.lat, lng: src.lng } : undefined);
      if (pt) terminalPoints.set(`${iata}:${term}`, { lat: pt.lat, lng: pt.lng });
    }
  }

  const keyList = [...names.keys()];
  const areas = new Set([...locator.byCode.values()].map((d) => d.area));
  /**
   * Qualifiers that name a region abroad (FOREIGN_REGIONS, and the countries of airports.csv by
   * name but those a UK qualifier names: "United Kingdom"), by normalised text: the country
   * codes there, and whether the text is a code that is also a UK postcode area or a word.
   */
  const foreignRegions = new Map<string, { countries: string[]; ambiguous: boolean }>();
  const addForeignRegion = (text: string, country: string, ambiguous: boolean) => {
    const key = normalizeName(text);
    if (key === '' || NATION_ALIASES[key]) return;
    const had = foreignRegions.get(key);
    if (!had) foreignRegions.set(key, { countries: [country], ambiguous });
    else {
      if (!had.countries.includes(country)) had.countries.push(country);
      had.ambiguous ||= ambiguous;
    }
  };
  for (const [country, list] of Object.entries(FOREIGN_REGIONS)) {
    for (const entry of list.split('|')) {
      const space = entry.indexOf(' ');
      const code = entry.slice(0, space);
      addForeignRegion(entry.slice(space + 1), country, false);
      if (code !== '-') addForeignRegion(code, country, areas.has(code) || FOREIGN_CODE_WORDS.has(code.toLowerCase()));
    }
  }
  for (const r of recs)
    if (r.source === 'airport' && !r.uk && r.country) addForeignRegion(r.country, r.countryCode, false);
  /** London's split districts: "W1" → W1A…W1W, "SW1" → SW1A…SW1Y, "EC1" → EC1A…EC1Y. */
  const sectors = new Map<string, District[]>();
  for (const d of locator.byCode.values()) {
    const m = /^([A-Z]{1,2}[0-9])[A-Z]$/.exec(d.district);
    if (!m?.[1] || locator.get(m[1])) continue;
    const list = sectors.get(m[1]);
    if (list) list.push(d);
    else sectors.set(m[1], [d]);
  }
  const fuzzy = createFuzzyIndex(keyList);

  // ----- helpers over the index -----

  const nearestOf = (rec: Rec): NearestDistrict | null => {
    if (!rec.uk) return null;
    if (!nearestCache.has(rec.id)) nearestCache.set(rec.id, locator.nearest(rec.lat, rec.lng));
    return nearestCache.get(rec.id) ?? null;
  };

  /**
   * The passenger airport of a town, for where at an airport written beside the town alone
   * ("Terminal 1, Manchester", "Arrivals, Glasgow"; see resolve). The major airport named after
   * the town, the most important of several when it is within TOWN_AIRPORT_RADIUS ("Glasgow"
   * is Glasgow International, not Prestwick, 46 km off; "London" none, Heathrow being 23 km
   * out, nor "Belfast"); else, for a town no major airport names, the one major airport whose
   * largest town within AIRPORT_TOWN_RADIUS it is, a town of BIG_TOWN or more ("Crawley" is
   * Gatwick's, which names London; "Paisley" Glasgow's). Minor airfields named after a town
   * ("Nottingham Airport") are not where its passengers arrive: the town stays.
   */
  const townAirport = new Map<number, Rec>();
  const isMajor = (rec: Rec) => rec.uk && rec.iata !== undefined && MAJOR_UK_AIRPORTS.includes(rec.iata);
  const namedByMajor = new Set<number>();
  for (const [townId, airports] of airportsNaming) {
    const town = recs[townId];
    const best = airports.filter(isMajor).sort((x, y) => x.tier - y.tier)[0];
    if (!town || !best) continue;
    namedByMajor.add(townId);
    if (haversineMeters(town, best) <= TOWN_AIRPORT_RADIUS) townAirport.set(townId, best);
  }
  // The councils each postcode district lies in: the airport is the town's when the town's
  // council is one of its district's (Gatwick's RH6 is mostly Reigate and Banstead's, but the
  // airport is in Crawley's part).
  const districtCouncils = new Map<string, string[]>();
  for (const r of readCsvRecords(join(dataDir, 'uk-postcode-districts.csv'))) {
    const codes = [r.local_authority_code ?? '', ...(r.other_local_authority_codes ?? '').split(';')];
    districtCouncils.set(r.district ?? '', codes.filter(Boolean));
  }
  const nearMajors = new Map<number, Rec[]>();
  for (const airport of recs) {
    if (airport.source !== 'airport' || !isMajor(airport)) continue;
    const councils = districtCouncils.get(nearestOf(airport)?.district.district ?? '') ?? [];
    const largest = recs
      .filter(
        (t) =>
          t.source === 'town' &&
          !t.pplx &&
          t.population >= BIG_TOWN &&
          haversineMeters(t, airport) <= AIRPORT_TOWN_RADIUS &&
          councils.includes(nearestOf(t)?.district.localAuthorityCode ?? ''),
      )
      .sort((x, y) => y.population - x.population)[0];
    if (largest && !namedByMajor.has(largest.id))
      nearMajors.set(largest.id, [...(nearMajors.get(largest.id) ?? []), airport]);
  }
  for (const [townId, airports] of nearMajors)
    if (airports.length === 1 && airports[0]) townAirport.set(townId, airports[0]);

  const refsToCands = (key: string, distance: number, intent: Intent | null): Cand[] => {
    const refs = names.get(key) ?? [];
    const out: Cand[] = [];
    for (const ref of refs) {
      if (ref.intentOnly && ref.intentOnly !== intent) continue;
      const rec = recs[ref.rec];
      if (rec) out.push({ rec, variant: ref.variant, distance });
    }
    return out;
  };

  const dedupe = (cands: Cand[], cmp: (a: Cand, b: Cand) => number): Cand[] => {
    cands.sort(cmp);
    const seen = new Set<number>();
    return cands.filter((c) => {
      if (seen.has(c.rec.id)) return false;
      seen.add(c.rec.id);
      return true;
    });
  };

  /**
   * A name as written with the abbreviations people use in station names spelt out: "St" as
   * its last word is Street ("Liverpool Lime St"; elsewhere it is Saint, "Kings Cross St
   * Pancras", as normalizeName makes it), unless `keepSt`, and "X" after the first word is
   * Cross ("Kings X", "Charing X", "New X Gate"); null when there is neither.
   */
  const expandAbbreviations = (key: string, keepSt: boolean): string | null => {
    const toks = tokensOf(key);
    let changed = false;
    const out = toks.map((t, i) => {
      if (i > 0 && (t === 'x' || (t === 'st' && !keepSt && i === toks.length - 1))) {
        changed = true;
        return t === 'x' ? 'cross' : 'street';
      }
      return t;
    });
    return changed ? out.join(' ') : null;
  };

  /**
   * The candidates of one key: its own, else, when it names nothing, those of its spelt-out
   * form (expandAbbreviations) when that names a station ("Liverpool Lime St" and "Kings X"
   * were not found; "Liverpool Lime Street" and "Kings Cross" are the stations). All of that
   * form's candidates, so it ranks as the long form does ("Chester-le-St" is the town, as
   * "Chester-le-Street" is). Exact only: a street "St" that no station's name spells ("Bold
   * St", "Oxford St") is left as it was, and is not matched fuzzily to one ("Bond Street").
   */
  const keyCands = (key: string, intent: Intent | null, keepSt: boolean): Cand[] => {
    const own = refsToCands(key, 0, intent);
    if (own.length > 0) return own;
    const long = expandAbbreviations(key, keepSt);
    if (long === null) return own;
    const cands = refsToCands(long, 0, intent);
    return cands.some((c) => c.rec.kind === 'station') ? cands : own;
  };

  const exactCands = (p: Parsed): Cand[] =>
    dedupe(
      p.keys.flatMap((k) => keyCands(k, p.intent, p.keepSt === true)),
      compareCands(p.intent),
    );

  const fuzzyCands = (p: Parsed): Cand[] => {
    const out: Cand[] = [];
    for (const k of p.keys) {
      const budget = fuzzyBudget(k);
      if (budget === 0) continue;
      for (const hit of fuzzy.search(k, budget)) out.push(...refsToCands(hit.key, hit.distance, p.intent));
    }
    return dedupe(out, compareCands(p.intent));
  };

  /** A 3-letter code, alone ("KGX", "lgw") or with words of its name or city ("Paris CDG"). */
  const codeCands = (p: Parsed): Cand[] => {
    for (const key of p.keys) {
      const toks = tokensOf(key);
      const options: Array<{ code: string; rest: string[] }> = [];
      if (toks.length === 1) options.push({ code: toks[0] ?? '', rest: [] });
      else if (toks.length > 1) {
        options.push({ code: toks[toks.length - 1] ?? '', rest: toks.slice(0, -1) });
        options.push({ code: toks[0] ?? '', rest: toks.slice(1) });
      }
      for (const option of options) {
        const code = option.code;
        if (!/^[a-z]{3}$/.test(code)) continue;
        const rest = option.rest.filter((w) => !STATION_WORDS.has(w) && !AIRPORT_WORDS.has(w));
        const upper = code.toUpperCase();
        const fits = (rec: Rec | undefined): rec is Rec => {
          if (!rec) return false;
          if (rest.length === 0) return true;
          const words = new Set(tokensOf([normalizeName(rec.name), ...rec.qualifierText].join(' ')));
          return rest.every((w) => words.has(w));
        };
        const station = crsIndex.get(upper);
        const airport = iataIndex.get(upper);
        const s = fits(station) ? station : undefined;
        const a = fits(airport) ? airport : undefined;
        if (!s && !a) continue;
        let order: Rec[];
        if (s && a) {
          let airportFirst: boolean;
          if (p.intent === 'airport') airportFirst = true;
          else if (p.intent === 'station') airportFirst = false;
          else if (s.servesIata === a.iata) airportFirst = true;
          else airportFirst = a.uk && MAJOR_UK_AIRPORTS.includes(upper) && !CRS_WINS.has(upper);
          order = airportFirst ? [a, s] : [s, a];
        } else order = [s ?? a].filter((x): x is Rec => x !== undefined);
        return order.map((rec) => ({ rec, variant: 'full' as const, distance: 0 }));
      }
    }
    return [];
  };

  /**
   * Candidates for one piece of text, best first: exact UK names, then codes, then exact names
   * abroad ("Man" is a town in Côte d'Ivoire, "MAN" a UK code), then fuzzy. Memoised: the
   * answer depends only on the text, and the same text is looked up again in address parsing.
   */
  const memo = new Map<string, Cand[]>();
  const lookup = (p: Parsed, allowFuzzy = true): Cand[] => {
    const memoKey = `${allowFuzzy ? 1 : 0}${p.keepSt ? 1 : 0}|${p.intent ?? ''}|${p.keys.join('|')}|${p.fallbackKeys.join('|')}`;
    const hit = memo.get(memoKey);
    if (hit) return hit;
    let exact = exactCands(p);
    // The whole text names nothing: perhaps an airport's name with where at the airport, or
    // "international", added ("Manchester Airport T2", "… Arrivals").
    if (p.fallbackKeys.length > 0 && refsToCands(p.keys[0] ?? '', 0, p.intent).length === 0) {
      for (const key of p.fallbackKeys) {
        if (refsToCands(key, 0, p.intent).length === 0) continue;
        exact = exactCands({ ...p, keys: [key, ...p.keys] });
        break;
      }
    }
    // "<town> station" where the town's station has another name ("Bath Spa", "Milton Keynes
    // Central") or the town is named short ("Stoke" for Stoke-on-Trent) is that station: it
    // was the town, 1.5 km from Milton Keynes Central, kind place, so station rules were
    // missed. Only the town the text names (the first), and only its main station.
    if (p.intent === 'station' && !exact.some((c) => c.rec.kind === 'station')) {
      const town = exact.find((c) => c.rec.source === 'town');
      const main = town ? mainStationOf(town.rec) : undefined;
      if (main) exact = [{ rec: main, variant: 'derived', distance: 0 }, ...exact];
    }
    let out: Cand[];
    if (exact.some((c) => c.rec.uk)) {
      out = exact;
      // "LYE airport": the name is a station's, the code an airport's; the text says airport.
      if (p.intent && !exact.some((c) => c.rec.kind === p.intent)) {
        const codes = codeCands(p);
        if (codes.some((c) => c.rec.kind === p.intent)) out = [...codes, ...exact];
      }
    } else {
      const codes = codeCands(p);
      if (codes.length > 0) out = codes;
      else if (exact.length > 0) out = exact;
      else out = allowFuzzy ? fuzzyCands(p) : [];
    }
    if (memo.size >= 10_000) memo.clear();
    memo.set(memoKey, out);
    return out;
  };

  /**
   * A small town and its station share a name ("Ely"): unless the text asks for a station,
   * the town is meant. Picks, among candidates as good as the first (same fuzzy distance and
   * qualifier score), a town (not a neighbourhood) within 5 km of a leading station.
   */
  const preferTown = (ordered: Array<{ c: Cand; score: number }>, intent: Intent | null): Cand | undefined => {
    const top = ordered[0];
    if (top?.c.rec.kind !== 'station' || intent === 'station' || top.c.variant === 'alias') return top?.c;
    const town = ordered.find(
      (o) =>
        o.score === top.score &&
        o.c.distance === top.c.distance &&
        o.c.rec.source === 'town' &&
        !o.c.rec.pplx &&
        o.c.variant !== 'city' &&
        haversineMeters(o.c.rec, top.c.rec) <= 5_000,
    );
    return town?.c ?? top.c;
  };

  /**
   * Whether the candidates for a name are only a guess, which a post town of the name exactly
   * beats: none, fuzzy ones ("Aberlour" was Aberdour, 159 km off; "Hawes" Hayes), or an airport
   * abroad by its city's name alone ("Montgomery", Alabama's: outside the UK), the last of
   * names (see classScore). With worldwide too: a UK place resolves the same either way.
   */
  const weakCands = (cands: Cand[]): boolean => {
    const top = cands[0];
    return top === undefined || top.distance > 0 || (!top.rec.uk && top.variant === 'city');
  };

  /** How far from its point a place reaches, roughly, by its kind and size. */
  const placeRadius = (r: Rec): number =>
    r.kind !== 'place' ? 3_000 : r.population >= 1_000_000 ? 25_000 : r.population >= 200_000 ? 12_000 : 8_000;

  // ----- qualifiers ("Newport, Wales") -----

  interface Qualifier {
    tokens: string[];
    nations: string[] | null;
    /** The councils of a county named in no postal address (METROPOLITAN_COUNTIES). */
    councils: string[] | null;
    district: District | null;
    place: Rec | null;
    /**
     * When the qualifier names a county or council, and no populated town, station or airport,
     * the districts it is made of; else null.
     */
    region: District[] | null;
  }

  /** Each geographic district with the words of its council's and its postal county's names. */
  const districtWords = [...locator.byCode.values()]
    .filter((d) => d.geographic)
    .map((d) => ({
      d,
      council: tokensOf(normalizeName(d.localAuthorityName ?? '')),
      county: tokensOf(normalizeName(d.county ?? '')),
    }));
  /** Geographic districts by each of their post towns (normalised): see postTownPlace. */
  const postTownDistricts = new Map<string, District[]>();
  for (const { d } of districtWords) {
    for (const t of d.postTowns) {
      const key = normalizeName(t);
      postTownDistricts.set(key, [...(postTownDistricts.get(key) ?? []), d]);
    }
  }
  // Keyed by the qualifier's words, which callers write: bounded, so text never seen before
  // cannot grow it for ever (it is emptied when full; a miss costs one pass over the districts).
  const regions = new Map<string, District[] | null>();
  const MAX_REGIONS = 10_000;
  const regionOf = (tokens: string[], councils: string[] | null): District[] | null => {
    const key = tokens.join(' ');
    if (!regions.has(key)) {
      if (regions.size >= MAX_REGIONS) regions.clear();
      const has = (words: string[]) => words.length > 0 && tokens.every((t) => words.includes(t));
      const ds = districtWords
        .filter((w) => (councils ? councils.includes(w.d.localAuthorityName ?? '') : has(w.council) || has(w.county)))
        .map((w) => w.d);
      regions.set(key, ds.length > 0 ? ds : null);
    }
    return regions.get(key) ?? null;
  };

  const prepareQualifier = (raw: string): Qualifier | null => {
    const norm = normalizeName(raw);
    if (norm === '') return null;
    const tokens = tokensOf(norm).flatMap((t) => tokensOf(COUNTY_ABBREVIATIONS[t] ?? t));
    const joined = tokens.join(' ');
    const compact = joined.replace(/ /g, '').toUpperCase();
    const district = OUTWARD_RE.test(compact) ? (locator.get(compact) ?? null) : null;
    const placeCands = district ? [] : exactCands(parseQuery(joined)).filter((c) => c.rec.uk);
    const nations = NATION_ALIASES[joined] ?? null;
    const councils = METROPOLITAN_COUNTIES[joined] ?? null;
    const place = placeCands[0]?.rec ?? null;
    // A county's or council's name that is also a town's ("Leeds", "Durham") stays the town's;
    // GeoNames has a point without people for some councils ("Highland", at Inverness).
    const regionOnly = place === null || (place.source === 'town' && place.population === 0);
    return {
      tokens,
      nations,
      councils,
      district,
      place,
      region: !nations && !district && regionOnly ? regionOf(tokens, councils) : null,
    };
  };

  const qualifierTexts = (rec: Rec): string[][] => {
    const texts = [...rec.qualifierText];
    const nd = nearestOf(rec)?.district;
    if (nd) {
      if (nd.localAuthorityName) texts.push(normalizeName(nd.localAuthorityName));
      if (nd.county) texts.push(normalizeName(nd.county));
      for (const t of nd.postTowns) texts.push(normalizeName(t));
    }
    return texts.map(tokensOf);
  };

  const nationOf = (rec: Rec): string | undefined => rec.nation ?? nearestOf(rec)?.district.country;

  const matchesQualifier = (rec: Rec, q: Qualifier): boolean => {
    if (q.nations) return rec.uk && q.nations.includes(nationOf(rec) ?? '');
    if (q.councils) return q.councils.includes(nearestOf(rec)?.district.localAuthorityName ?? '');
    if (q.district) {
      const nd = nearestOf(rec);
      return nd?.district.district === q.district.district || haversineMeters(rec, q.district) <= 10_000;
    }
    if (qualifierTexts(rec).some((words) => q.tokens.every((t) => words.includes(t)))) return true;
    // The place itself agrees too: "Manchester Airport, Ringway" (Ringway names the airport)
    // was Manchester, the only candidate near the airport, and "Stansted Airport, Stansted"
    // its station.
    if (q.place && haversineMeters(rec, q.place) <= 30_000) return true;
    return false;
  };

  /**
   * A place just outside the county or council a qualifier names (see LOOSE_REGION_RADIUS):
   * worth half a match, so a place in it still comes first.
   */
  const nearRegion = (rec: Rec, q: Qualifier): boolean => {
    if (!rec.uk || q.region === null) return false;
    // A city's own borough or a county around it ("London, Kensington and Chelsea") says where
    // in the city: the address there stands (see resolveAddress), not the city's centre.
    const city = rec.kind === 'place' && rec.population >= 200_000 ? placeRadius(rec) : 0;
    if (q.region.some((d) => haversineMeters(rec, d) <= city)) return false;
    return q.region.some((d) => haversineMeters(rec, d) <= LOOSE_REGION_RADIUS);
  };

  /**
   * How many qualifiers a candidate matches, a loose match (nearRegion) counting half: only for
   * a place named exactly by its own name, or by its name without the words after a comma or
   * in brackets ("Hayes (Kent)"); not by a shortened one ("Birmingham, Leicestershire" is not
   * Birmingham International, the one "Birmingham" near Leicestershire).
   */
  const qualifierScore = (c: Cand, quals: Qualifier[]): number => {
    const ownName =
      c.distance === 0 &&
      (c.variant === 'full' ||
        c.variant === 'alias' ||
        c.rec.source === 'town' ||
        (c.rec.source === 'rail' && c.rec.qualifierText.length > 0));
    return quals.reduce(
      (sum, q) => sum + (matchesQualifier(c.rec, q) ? 1 : ownName && nearRegion(c.rec, q) ? 0.5 : 0),
      0,
    );
  };

  /**
   * Whether a postcode district is in what a qualifier names: a nation, county, council or
   * post town by name, or the district by its code. Unlike matchesQualifier, nothing by
   * distance: a post town's districts reach far out of the town ("Milton Keynes, Luton" is
   * no Milton Keynes district near Luton).
   */
  const districtMatchesQualifier = (d: District, q: Qualifier): boolean => {
    if (q.nations) return q.nations.includes(d.country);
    if (q.councils) return q.councils.includes(d.localAuthorityName ?? '');
    if (q.district) return d.district === q.district.district;
    const texts = [d.localAuthorityName, d.county, ...d.postTowns].filter((t): t is string => !!t);
    return texts.some((t) => q.tokens.every((w) => tokensOf(normalizeName(t)).includes(w)));
  };

  /**
   * A post town of the name in the county or council the qualifiers name, when it matches
   * them better than every place of the name we have (`beat`, their best qualifierScore):
   * "St Ives, Cambridgeshire" and "Wellington, Somerset" are post towns (PE27, TA21) that the
   * town list (GeoNames cities1000, as shipped) lacks, and were St Ives in Cornwall and
   * Wellington in Telford. The point is the centre of the town's districts there (weighted by
   * their postcodes: 1.5 km from GeoNames' point for the median town of several districts,
   * 1.0 km for one district); none when they lie apart, as two towns would. Read only when the
   * post-town file is there (districts.ts).
   */
  const postTownPlace = (
    query: string,
    name: string,
    quals: Qualifier[],
    cands: Cand[],
    beat: number,
  ): GeocodeResult | null => {
    const districts = postTownDistricts.get(name);
    if (!districts || quals.length === 0) return null;
    const scored = districts.map((d) => ({ d, score: quals.filter((q) => districtMatchesQualifier(d, q)).length }));
    const best = Math.max(...scored.map((x) => x.score));
    // A place just outside the county (half a match) is as good: "Oban, Highlands" is the
    // town of Oban (Argyll and Bute), not PA80, Morvern across Loch Linnhe, in Highland with
    // the post town Oban, 27 km off.
    if (best <= Math.ceil(beat)) return null;
    const chosen = scored.filter((x) => x.score === best).map((x) => x.d);
    if (!liesTogether(chosen)) return null;
    const { lat, lng } = districtCentre(chosen);
    // A town of the name we have near them is the post town's own, reaching into the council
    // named ("Glasgow, East Renfrewshire", G77; "Bristol, Somerset", BS41): that town stands.
    const own = cands.some(
      (c) => c.rec.source === 'town' && c.distance === 0 && haversineMeters(c.rec, { lat, lng }) <= POST_TOWN_SPREAD,
    );
    if (own) return null;
    const town = chosen[0]?.postTowns.find((t) => normalizeName(t) === name) ?? titleCase(name);
    const one = chosen.length === 1 ? (chosen[0] ?? null) : null;
    return {
      ok: true,
      place: placeFromDistrictPoint(query, postTownName(town), 'place', lat, lng, one),
    };
  };

  /**
   * A post town named alone ("Port Isaac", "Fort Augustus", "Montgomery"), for a name that
   * nothing else finds (see weakCands): all 1,400-odd post towns are in the post-town file,
   * some 100 of them in no name the town list has. The point is the centre of all its
   * districts, as in postTownPlace, when they lie together; a post town of two places far
   * apart is neither without a qualifier to decide (postTownPlace).
   */
  const postTownPoints = new Map<string, { name: string; lat: number; lng: number; district: District | null }>();
  for (const [key, ds] of postTownDistricts) {
    if (!liesTogether(ds)) continue;
    const written = ds[0]?.postTowns.find((t) => normalizeName(t) === key) ?? titleCase(key);
    postTownPoints.set(key, {
      name: postTownName(written),
      ...districtCentre(ds),
      district: ds.length === 1 ? (ds[0] ?? null) : null,
    });
  }
  /**
   * The post town a text names (its whole, or without "town centre"; none for a station or
   * airport), over what else the text found, only a guess (see weakCands); a UK guess near the
   * post town is the town spelt another way and stands ("Clynderwen", SA66, is Clunderwen
   * station, in the village, 4.9 km from the district's centre).
   */
  const postTownOver = (p: Parsed, guess: Cand | undefined) => {
    if (p.intent === 'station' || p.intent === 'airport') return undefined;
    for (const key of p.keys) {
      const pt = postTownPoints.get(key);
      if (!pt) continue;
      return guess?.rec.uk && haversineMeters(guess.rec, pt) <= POST_TOWN_RADIUS ? undefined : pt;
    }
    return undefined;
  };

  // ----- building results -----

  const placeFromDistrictPoint = (
    query: string,
    name: string,
    kind: Place['kind'],
    lat: number,
    lng: number,
    district: District | null,
  ): Place => {
    const d = district ?? locator.nearest(lat, lng)?.district ?? null;
    return {
      query,
      name,
      kind,
      lat,
      lng,
      countryCode: 'GB',
      localAuthorityCode: d?.localAuthorityCode ?? null,
      postcodeDistrict: d?.district ?? null,
    };
  };

  const resultFor = (query: string, rec: Rec, terminal: string | null, worldwide: boolean): GeocodeResult => {
    if (!rec.uk) {
      const where = [rec.city, rec.country].filter(Boolean).join(', ');
      if (!worldwide) {
        return {
          ok: false,
          reason: 'outside_uk',
          message: `"${query}" is outside the UK (${rec.name}${where ? `, ${where}` : ''})${WORLDWIDE_HINT}`,
        };
      }
      return {
        ok: true,
        place: {
          query,
          name: rec.name,
          kind: 'airport',
          lat: rec.lat,
          lng: rec.lng,
          countryCode: rec.countryCode,
          localAuthorityCode: null,
          postcodeDistrict: null,
          ...(rec.iata ? { iata: rec.iata } : {}),
          ...(terminal ? { terminal } : {}),
        },
      };
    }
    let lat = rec.lat;
    let lng = rec.lng;
    let name = rec.name;
    if (rec.kind === 'airport' && terminal) {
      const pt = terminalPoints.get(`${rec.iata}:${terminal}`);
      if (pt) {
        lat = pt.lat;
        lng = pt.lng;
      }
      name = /^T\d$/.test(terminal)
        ? `${rec.name}, Terminal ${terminal.slice(1)}`
        : `${rec.name}, ${terminal} Terminal`;
    }
    // A terminal keeps its airport's district and council (Heathrow T5 is in Hillingdon even
    // though the nearest district centroid to it is Stanwell's, TW19, in Spelthorne).
    // Likewise a station inside an airport (Heathrow Terminal 5, Gatwick Airport) takes the
    // airport's district.
    const served = rec.servesIata ? iataIndex.get(rec.servesIata) : undefined;
    const nd = served?.uk ? nearestOf(served) : nearestOf(rec);
    const place: Place = {
      query,
      name,
      kind: rec.kind,
      lat,
      lng,
      countryCode: 'GB',
      localAuthorityCode: nd?.district.localAuthorityCode ?? null,
      postcodeDistrict: nd?.district.district ?? null,
    };
    if (rec.kind === 'airport') {
      if (rec.iata) place.iata = rec.iata;
      if (terminal) place.terminal = terminal;
    }
    // National Rail stations carry their CRS code, so station charges (e.g. Manchester
    // Piccadilly's rank barrier) can apply.
    if (rec.kind === 'station' && rec.crs) place.crs = rec.crs;
    return { ok: true, place };
  };

  /** An address abroad: only airports are known there; the nearest by name is suggested. */
  const abroadAddress = (query: string, rec: Rec, worldwide: boolean): GeocodeResult => {
    const where = [rec.city, rec.country].filter(Boolean).join(', ');
    const airport = `name one (e.g. "${rec.name}")`;
    return worldwide
      ? notFound(query, `No UK place matches "${query}"; abroad, only airports are booked: ${airport}`)
      : {
          ok: false,
          reason: 'outside_uk',
          message: `"${query}" is outside the UK${where ? ` (${where})` : ''}, where only airports are booked: ${airport}${WORLDWIDE_HINT}`,
        };
  };

  const notFound = (query: string, detail?: string): GeocodeResult => ({
    ok: false,
    reason: 'not_found',
    message: detail ?? `No UK postcode, station, airport or town matches "${query}"`,
  });

  interface Abroad {
    /** The qualifier as written ("NJ", "Connecticut"). */
    label: string;
    /** The first place abroad, in that country, of the name qualified ("Newark": Newark Liberty). */
    rec: Rec | undefined;
  }

  /**
   * Whether a qualifier (`raw`, prepared as `q`) puts the name it qualifies abroad, given the
   * candidates for that name (`cands`): it is in foreignRegions and names nothing in the UK. A
   * code that is also a UK postcode area or a word ("CA", "PA", "ME", "OK") counts only beside
   * a name we know abroad in its country and no UK place of the name in that postcode area
   * ("Rochester, ME" is Kent's, in ME; "Lancaster, LA" Lancashire's). "Ireland" names the island
   * as well: beside a name in Northern Ireland it is the UK's ("Belfast, Ireland").
   */
  const foreignRegionOf = (raw: string, q: Qualifier, cands: Cand[]): Abroad | null => {
    const region = foreignRegions.get(q.tokens.join(' '));
    if (!region || q.nations || q.councils || q.district || q.place || q.region) return null;
    const rec = cands.find((c) => !c.rec.uk && region.countries.includes(c.rec.countryCode))?.rec;
    if (region.ambiguous) {
      const area = q.tokens.join('').toUpperCase();
      if (!rec || cands.some((c) => c.rec.uk && nearestOf(c.rec)?.district.area === area)) return null;
    }
    if (q.tokens.join(' ') === 'ireland' && cands.some((c) => c.rec.uk && nationOf(c.rec) === 'Northern Ireland'))
      return null;
    return { label: cleanText(raw), rec };
  };

  /**
   * The answer for a text qualified as abroad (foreignRegionOf): the place of the name there
   * when we know one (an airport; for an address, as abroadAddress says), else outside the UK,
   * or with worldwide not found.
   */
  const abroadResult = (
    query: string,
    abroad: Abroad,
    terminal: string | null,
    worldwide: boolean,
    address: boolean,
  ): GeocodeResult => {
    if (abroad.rec)
      return address ? abroadAddress(query, abroad.rec, worldwide) : resultFor(query, abroad.rec, terminal, worldwide);
    return worldwide
      ? notFound(
          query,
          `No UK place matches "${query}": ${abroad.label} is outside the UK, and no airport of the name there is known`,
        )
      : {
          ok: false,
          reason: 'outside_uk',
          message: `"${query}" is outside the UK (${abroad.label}), where only airports are booked${WORLDWIDE_HINT}`,
        };
  };

  /** An outward code, or a London sector such as "W1" made of W1A…W1W. */
  const outwardPoint = (outward: string): { lat: number; lng: number; district: District } | null => {
    const d = locator.get(outward);
    if (d) return { lat: d.lat, lng: d.lng, district: d };
    const subs = sectors.get(outward);
    if (!subs) return null;
    const { lat, lng } = districtCentre(subs);
    const near = locator.nearest(lat, lng)?.district;
    return near ? { lat, lng, district: near } : null;
  };

  const cleanText = (text: string) =>
    text
      .replace(/\s+/g, ' ')
      .replace(/\s*,\s*/g, ', ')
      .replace(/^[\s,;.]+|[\s,;.]+$/g, '');

  /**
   * A result's point (and the district and council that follow from it), named as the text
   * was written, kind address, as resolveAddress names its addresses: for a venue at a station
   * or airport ("Hilton Garden Inn, Bristol Airport, Bristol" is at the airport, but the driver
   * looks for the hotel and airport rules and meet and greet are not a hotel pickup's).
   */
  const addressAt = (query: string, at: GeocodeResult): GeocodeResult => {
    if (!at.ok) return at;
    const { lat, lng, countryCode, localAuthorityCode, postcodeDistrict } = at.place;
    return {
      ok: true,
      place: {
        query,
        name: cleanText(query),
        kind: 'address',
        lat,
        lng,
        countryCode,
        localAuthorityCode,
        postcodeDistrict,
      },
    };
  };

  /**
   * The station or airport a part of the text beside a postcode names, exactly and with the
   * word station or airport (or a terminal), when it lies near the postcode's district: within
   * 3 km of the district's centre or, where districts are large, three times as far as the
   * nearest district centre to it (Edinburgh Airport is 2.1 km from EH29's, 5.8 km from EH12's;
   * Inverness Airport 6.6 km from IV10's, 11.7 km from IV2's). A place named farther off
   * contradicts the postcode ("Edinburgh Airport, EH1 1YZ", central Edinburgh, 11 km), which
   * stands. Without the word, a name may be the address's street or neighbourhood ("Baker
   * Street, London NW1 6XE", "Hampstead, London NW3 2PT", "Lower Street, Stansted CM24 8LP").
   */
  const namedBesidePostcode = (
    rest: string,
    point: { lat: number; lng: number },
  ): { rec: Rec; terminal: string | null } | null => {
    const wholeTerminal = parseQuery(normalizeName(rest)).terminal;
    const near = (rec: Rec): boolean =>
      haversineMeters(rec, point) <= Math.max(3_000, 3 * (nearestOf(rec)?.distanceMeters ?? 0));
    // Each part whole ("Brampton (Suffolk) station"), then its bracketed pieces ("Edinburgh
    // Airport (EDI)"); of places of the same name, the one near the postcode ("Redbridge
    // Station, Ilford IG4 9DN" is London's, not Southampton's).
    for (const part of rest.split(/[,;\n]+/).flatMap((s) => [s, ...s.split(/[()]+/)])) {
      const norm = normalizeName(part);
      if (norm === '' || stripHouseNumber(part).had) continue;
      const p = parseQuery(norm);
      // Or, without the word, a station's official name that no street or neighbourhood has
      // ("London Kings Cross, N1 9AL" was N1's centre, 1.8 km off, kind address).
      const official = cityStationNames.get(norm);
      if (p.intent === null && official && near(official)) return { rec: official, terminal: null };
      if (p.intent !== 'station' && p.intent !== 'airport') continue;
      const rec = exactCands(p).find((c) => c.rec.uk && c.rec.kind === p.intent && near(c.rec))?.rec;
      if (rec) return { rec, terminal: p.terminal ?? wholeTerminal };
    }
    return null;
  };

  const postcodeResult = (query: string, text: string, worldwide: boolean): GeocodeResult | null => {
    const pc = findPostcode(text);
    if (!pc) return null;
    const area = outwardArea(pc.outward) ?? '';
    const formatted = `${pc.outward} ${pc.inward}`;
    const crown = CROWN_DEPENDENCY_AREAS[area];
    if (crown) {
      return worldwide
        ? notFound(query, `${formatted} is a postcode in ${crown}, which this gazetteer does not cover`)
        : {
            ok: false,
            reason: 'outside_uk',
            message: `${formatted} is a postcode in ${crown}, outside the UK${WORLDWIDE_HINT}`,
          };
    }
    if (!areas.has(area)) return null;
    const point = outwardPoint(pc.outward);
    if (!point) return notFound(query, `Postcode district ${pc.outward} (in "${query}") is not a known UK district`);
    const rest = normalizeName(text.slice(0, pc.start) + text.slice(pc.end));
    // A station or airport named beside its postcode, as map apps and assistants write them
    // ("Edinburgh Airport (EDI), Edinburgh EH12 9DN, UK", "King's Cross Station, Euston Road,
    // London N1 9AL"), is that place: the district's centroid put it 5.8 km from the airport
    // (2 km from the station) as an address, and airport and station rules were missed.
    const named = rest === '' ? null : namedBesidePostcode(text.slice(0, pc.start) + text.slice(pc.end), point);
    if (named) return resultFor(query, named.rec, named.terminal, worldwide);
    // Only district centroids are available (Code-Point Open aggregated to outward codes), so
    // a full postcode is placed at its district's centroid: within a few km in towns, more in
    // rural districts (see radius_p90_m in uk-postcode-districts.csv).
    if (rest === '') {
      return {
        ok: true,
        place: placeFromDistrictPoint(query, formatted, 'postcode', point.lat, point.lng, point.district),
      };
    }
    const name = cleanText(`${text.slice(0, pc.start)}${formatted}${text.slice(pc.end)}`);
    return { ok: true, place: placeFromDistrictPoint(query, name, 'address', point.lat, point.lng, point.district) };
  };

  // ----- addresses -----

  /**
   * Drops a leading house number ("221B", "Flat 4, 12") from a part of the text. Read on the
   * raw words, so that "Five Ways" (normalised "5 ways") is not taken for a house number.
   */
  const stripHouseNumber = (raw: string): { tokens: string[]; had: boolean } => {
    const words = raw
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean);
    const tokens = tokensOf(normalizeName(raw));
    let i = 0;
    while (i < words.length && (/^\d+[a-z]?$/.test(words[i] ?? '') || HOUSE_WORDS.has(words[i] ?? ''))) i += 1;
    // "flat" alone is not a house number; a number or a number with a letter is.
    const had = words.slice(0, i).some((t) => /^\d/.test(t));
    return { tokens: had ? tokens.slice(i) : tokens, had };
  };

  interface Context {
    rec: Rec | null;
    lat: number;
    lng: number;
    district: District | null;
    radius: number;
  }

  const contextOf = (r: Rec): Context => ({ rec: r, lat: r.lat, lng: r.lng, district: null, radius: placeRadius(r) });

  /**
   * The place a part of an address names: an outward code, a UK name exactly, else a post town
   * of the name ("High Street, Port Isaac" was High Street station in Glasgow, the part before
   * taken as the place), else a UK name fuzzily.
   */
  const contextForText = (text: string, allowFuzzy: boolean): Context | null => {
    const compact = text.replace(/ /g, '').toUpperCase();
    if (OUTWARD_RE.test(compact)) {
      const pt = outwardPoint(compact);
      if (pt) return { rec: null, lat: pt.lat, lng: pt.lng, district: pt.district, radius: 6_000 };
    }
    const parsed = parseQuery(text);
    const best = lookup(parsed, allowFuzzy).find((c) => c.rec.uk);
    if (best?.distance === 0) return contextOf(best.rec);
    const pt = postTownOver(parsed, best);
    if (pt) return { rec: null, lat: pt.lat, lng: pt.lng, district: pt.district, radius: POST_TOWN_RADIUS };
    return best ? contextOf(best.rec) : null;
  };

  const namedStationNear = (tokens: string[], ctx: Context): Rec | null => {
    const n = tokens.length;
    for (let len = n; len >= 1; len--) {
      if (len === 1 && n !== 1) break;
      for (let start = 0; start + len <= n; start++) {
        const next = tokens[start + len];
        if (next !== undefined && STREET_WORDS.has(next)) continue;
        const key = tokens.slice(start, start + len).join(' ');
        const cands = refsToCands(key, 0, null)
          .filter((c) => c.rec.uk && c.rec.kind !== 'airport' && c.rec !== ctx.rec)
          .filter(
            (c) =>
              c.rec.kind === 'station' ||
              (ctx.rec?.kind === 'place' && !c.rec.pplx && c.rec.population < ctx.rec.population),
          )
          .filter((c) => haversineMeters(c.rec, ctx) <= ctx.radius)
          .sort(compareCands(null));
        if (cands[0]) return cands[0].rec;
      }
    }
    return null;
  };

  const resolveAddress = (
    query: string,
    segments: string[],
    worldwide: boolean,
    terminal: string | null,
  ): GeocodeResult | null => {
    const segs = segments.map((raw) => {
      const stripped = stripHouseNumber(raw);
      return { tokens: stripped.tokens, hadNumber: stripped.had };
    });
    const hadNumber = segs.some((s) => s.hadNumber);
    let ctx: Context | null = null;
    let ctxIdx = -1;
    let prefix: string[] = [];
    for (let i = segs.length - 1; i >= 0 && !ctx; i--) {
      const seg = segs[i];
      if (!seg || seg.tokens.length === 0) continue;
      // A part after the first that puts the address abroad ("10 Broad Street, Newark, NJ"; see
      // foreignRegionOf), judged by what the parts before it name: the address is there.
      const raw = segments[i] ?? '';
      if (i > 0 && !seg.hadNumber && foreignRegions.has(normalizeName(raw))) {
        const q = prepareQualifier(raw);
        const before = segs.slice(0, i).map((s) => parseQuery(s.tokens.join(' ')));
        const abroad =
          q &&
          foreignRegionOf(
            raw,
            q,
            before.flatMap((p) => lookup(p, false)),
          );
        if (abroad) {
          const airport = before.find(
            (p) => p.intent === 'airport' && abroad.rec && lookup(p, false)[0]?.rec === abroad.rec,
          );
          return abroadResult(query, abroad, airport?.terminal ?? terminal, worldwide, airport === undefined);
        }
      }
      ctx = contextForText(seg.tokens.join(' '), !seg.hadNumber);
      if (ctx) {
        ctxIdx = i;
        break;
      }
      for (let s = 1; s < seg.tokens.length; s++) {
        const suffix = seg.tokens.slice(s);
        if (suffix.length === 1 && STREET_WORDS.has(suffix[0] ?? '')) continue;
        ctx = contextForText(suffix.join(' '), false);
        if (ctx) {
          ctxIdx = i;
          prefix = seg.tokens.slice(0, s);
          break;
        }
      }
    }
    if (!ctx) {
      // An address abroad ("Eiffel Tower, Paris"): no street abroad is known, only airports, so
      // the answer names the airport to send instead, in either mode (without worldwide it is
      // outside the UK; with it, not found: the address is not the airport).
      for (const raw of segments) {
        const parsed = parseQuery(normalizeName(raw));
        const abroad = lookup(parsed, false)[0];
        if (!abroad || abroad.rec.uk) continue;
        // A part that names the airport itself ("Gate 5, Dublin Airport") is that airport.
        if (parsed.intent === 'airport') return resultFor(query, abroad.rec, parsed.terminal, worldwide);
        return abroadAddress(query, abroad.rec, worldwide);
      }
      return null;
    }
    const ctxRec = ctx.rec;
    const wholeSegmentContext = prefix.length === 0;
    if (ctxRec && ctxRec.kind !== 'place' && wholeSegmentContext && !hadNumber) {
      const parsed = parseQuery(segs[ctxIdx]?.tokens.join(' ') ?? '');
      return resultFor(query, ctxRec, parsed.terminal ?? terminal, worldwide);
    }
    // A part before the context that names a station or airport exactly, with the word
    // station or airport (or a terminal), and agrees with the context as a qualifier would, is
    // where the venue written first is ("Hilton Garden Inn, Bristol Airport, Bristol";
    // "WHSmith, Manchester Piccadilly station, Manchester"): the town after it was the point,
    // central Bristol 8 km from the airport. The venue stays an address at that point, named as
    // written (as the airport, the hotel was lost from the driver's name and airport rules and
    // meet and greet applied to a hotel pickup). Without the word the part may be a street
    // ("Bath Road, Heathrow"); with a house number the text stays an address.
    if (!hadNumber) {
      const q = prepareQualifier(segs[ctxIdx]?.tokens.slice(prefix.length).join(' ') ?? '');
      for (const raw of segments.slice(0, ctxIdx)) {
        const p = parseQuery(normalizeName(raw));
        if (q === null || (p.intent !== 'station' && p.intent !== 'airport')) continue;
        const rec = exactCands(p).find((c) => c.rec.uk && c.rec.kind === p.intent && matchesQualifier(c.rec, q))?.rec;
        if (rec) return addressAt(query, resultFor(query, rec, p.terminal ?? terminal, worldwide));
      }
    }
    let point: { lat: number; lng: number } = ctx;
    const before = [...segs.slice(0, ctxIdx).map((s) => s.tokens), prefix].filter((t) => t.length > 0);
    for (const tokens of before) {
      const named = namedStationNear(tokens, ctx);
      if (named) {
        point = named;
        break;
      }
    }
    const district = point === ctx ? ctx.district : null;
    return {
      ok: true,
      place: placeFromDistrictPoint(query, cleanText(query), 'address', point.lat, point.lng, district),
    };
  };

  // ----- the whole resolution -----

  const resolve = (query: string, opts: GeocodeOptions = {}): GeocodeResult => {
    const worldwide = opts.worldwide === true;
    const text = query.trim();
    if (text === '') return notFound(query, 'The place to geocode is empty');

    const pc = postcodeResult(query, text, worldwide);
    if (pc) return pc;

    const norm = normalizeName(text);
    if (norm === '') return notFound(query);

    const compact = norm.replace(/ /g, '').toUpperCase();
    if (OUTWARD_RE.test(compact) && !norm.includes(' ')) {
      const area = outwardArea(compact) ?? '';
      if (CROWN_DEPENDENCY_AREAS[area] && locator.get(compact) === undefined) {
        return {
          ok: false,
          reason: 'outside_uk',
          message: `${compact} is a postcode district in ${CROWN_DEPENDENCY_AREAS[area]}, outside the UK`,
        };
      }
      const pt = outwardPoint(compact);
      if (pt)
        return { ok: true, place: placeFromDistrictPoint(query, compact, 'postcode', pt.lat, pt.lng, pt.district) };
    } else if (OUTWARD_RE.test(compact) && norm.includes(' ')) {
      // "sw1a" typed as "sw 1a" is still an outward code.
      const pt = outwardPoint(compact);
      if (pt && /^[a-z]{1,2} ?[0-9][a-z0-9]?$/.test(norm)) {
        return { ok: true, place: placeFromDistrictPoint(query, compact, 'postcode', pt.lat, pt.lng, pt.district) };
      }
    }

    const rawSegments = text
      .split(/[,;\n()]+/)
      .map((s) => s.trim())
      .filter((s) => normalizeName(s) !== '');
    // A terminal may sit in its own part of the text ("Heathrow, Terminal 5"): it is not a
    // qualifier, and it applies to the airport named elsewhere. So may where at the airport
    // ("Heathrow, Arrivals"), and either may come first, as assistants and booking sites write
    // it ("Terminal 5, Heathrow Airport, London", "Departures, Gatwick North Terminal,
    // Crawley"): read as the name, it left the town after the airport as the address's point
    // (central London, 25 km from T5; Crawley, 5 km from the North Terminal). A text with
    // nothing else ("Terminal 5") keeps it.
    const wholeTerminal = parseQuery(norm).terminal;
    const onlyAtAirport = rawSegments.map((seg) => {
      const p = parseQuery(normalizeName(seg));
      return (
        p.airportCore === '' && (p.terminal !== null || tokensOf(p.norm).every((t) => NOT_IN_AIRPORT_NAMES.has(t)))
      );
    });
    const withoutTerminals = onlyAtAirport.every(Boolean)
      ? rawSegments
      : rawSegments.filter((_, i) => !onlyAtAirport[i]);
    // So may a code ("Manchester Airport (MAN)", "Leeds station, LDS", as booking sites and
    // assistants write them): when another part names a place with that code, its own CRS or
    // IATA or, for a station, the airport's it serves ("Luton Airport Parkway (LTN)"), the code
    // is a short form of that place, not a qualifier nor a place to read on its own ("MAN"
    // alone is Piccadilly, see CRS_WINS; "BRS" Bristol Airport, not Berrylands). A code that
    // agrees with no other part is kept: "Manchester (MAN)" is Piccadilly, and "Gatwick Airport
    // (GTW)", the station's own code beside its airport's name, is the station.
    const codeOf = (seg: string): string | null => {
      const n = normalizeName(seg);
      return /^[a-z]{3}$/.test(n) ? n.toUpperCase() : null;
    };
    const placeOfPart = (seg: string): Rec | undefined => {
      if (codeOf(seg) !== null || stripHouseNumber(seg).had) return undefined;
      const p = parseQuery(normalizeName(seg));
      return preferTown(
        lookup(p).map((c) => ({ c, score: 0 })),
        p.intent,
      )?.rec;
    };
    const hasCode = (rec: Rec, code: string): boolean =>
      rec.crs === code || rec.iata === code || rec.servesIata === code;
    const partPlaces =
      withoutTerminals.length > 1 && withoutTerminals.some(codeOf) ? withoutTerminals.map(placeOfPart) : [];
    const segments = withoutTerminals.filter((seg) => {
      const code = codeOf(seg);
      return code === null || !partPlaces.some((rec) => rec !== undefined && hasCode(rec, code));
    });
    const head = segments[0] ?? text;
    const headHasNumber = stripHouseNumber(head).had;
    // Where at an airport dropped above, with no part naming an airport, beside a town alone:
    // the passenger means the town's airport ("Terminal 1, Manchester", "Arrivals, Glasgow",
    // "North Terminal, Crawley" were the town itself, 14, 11 and 5 km from the airport; before
    // the terminal was dropped, an address at the same point). A terminal the airport is known
    // not to have is dropped ("Terminal 5, Crawley" is Gatwick), as is North or South of
    // another airport (only Gatwick names its terminals so). A town with no airport of its own
    // (townAirport: "Arrivals, York", "Terminal 5, London") is an address at the town's point
    // named as written, as before the terminal was dropped (it was the town, "London", kind
    // place: the terminal was lost from the driver's name).
    const atAirport =
      withoutTerminals.length < rawSegments.length &&
      !segments.some((seg) => {
        const p = parseQuery(normalizeName(seg));
        return p.intent === 'airport' || lookup(p)[0]?.rec.kind === 'airport';
      });
    const placeResult = (rec: Rec, terminal: string | null): GeocodeResult => {
      const town = atAirport && rec.source === 'town';
      const airport = town ? townAirport.get(rec.id) : undefined;
      if (!airport) {
        const at = resultFor(query, rec, terminal, worldwide);
        return town ? addressAt(query, at) : at;
      }
      const known = TERMINALS[airport.iata ?? ''];
      const has = terminal !== null && (known ? known[terminal] !== undefined : /^T\d$/.test(terminal));
      return resultFor(query, airport, has ? terminal : null, worldwide);
    };

    // A comma inside a real name ("Basford, Stoke-on-Trent"); brackets inside a station's name.
    if (segments.length > 1) {
      const whole = parseQuery(norm);
      const exact = exactCands(whole).filter((c) =>
        text.includes(',') ? c.rec.source === 'town' && normalizeName(c.rec.name) === norm : true,
      );
      if (exact[0] && !headHasNumber) return placeResult(exact[0].rec, whole.terminal);
    }

    if (!headHasNumber) {
      const qualified = segments.slice(1).map((raw) => ({ raw, q: prepareQualifier(raw) }));
      const quals = qualified.map((x) => x.q).filter((q): q is Qualifier => q !== null);
      // A name ending "St" with a town or other qualifier after it, and not the word station,
      // is the street there: "Lime St, Liverpool" and "Baker St, St Albans" stay addresses in
      // the town (as "Street" they are the stations, the second 30 km off; see
      // matchesQualifier). "Lime St station, Liverpool" is the station.
      const headParsed = parseQuery(normalizeName(head));
      const parsed: Parsed =
        quals.length > 0 && headParsed.intent !== 'station' ? { ...headParsed, keepSt: true } : headParsed;
      const cands = lookup(parsed);
      // A post town named alone, when no name we have is it (see postTownPoints).
      if (quals.length === 0 && !atAirport && weakCands(cands)) {
        const pt = postTownOver(parsed, cands[0]);
        if (pt)
          return { ok: true, place: placeFromDistrictPoint(query, pt.name, 'place', pt.lat, pt.lng, pt.district) };
      }
      if (cands.length > 0 && quals.length === 0) {
        const best = preferTown(
          cands.map((c) => ({ c, score: 0 })),
          parsed.intent,
        );
        if (best) return placeResult(best.rec, parsed.terminal ?? wholeTerminal);
      }
      const scored = cands.map((c, order) => ({ c, order, score: qualifierScore(c, quals) }));
      scored.sort((a, b) => b.score - a.score || a.order - b.order);
      const top = scored[0];
      // A post town of the name in the county or council named, when no place of the name we
      // have matches as well ("Wellington, Somerset": the town list has only Telford's and
      // Herefordshire's).
      if (parsed.intent === null && !atAirport && quals.length > 0) {
        const postTown = postTownPlace(query, parsed.norm, quals, cands, top?.score ?? 0);
        if (postTown) return postTown;
      }
      if (cands.length > 0) {
        const chosen = preferTown(scored, parsed.intent);
        if (top && chosen && top.score > 0) return placeResult(chosen.rec, parsed.terminal ?? wholeTerminal);
        // Nothing matched the qualifiers. One that puts the name abroad is not ignored: "Newark,
        // NJ" was Newark-on-Trent and "Boston, Massachusetts" Boston in Lincolnshire, as
        // addresses (see foreignRegionOf).
        for (const { raw, q } of qualified) {
          const abroad = q && foreignRegionOf(raw, q, cands);
          if (abroad) return abroadResult(query, abroad, parsed.terminal ?? wholeTerminal, worldwide, false);
        }
        // Else perhaps the head is a street or building ("Victoria Quarter, Leeds"), so try it as
        // an address before falling back to the bare name.
        const addr = resolveAddress(query, segments, worldwide, wholeTerminal);
        const first = cands[0];
        // But a UK airport named exactly is no street or building, and every place we know near
        // it matches (within 30 km): a qualifier that does not is a locality the data does not
        // know or reads as another, as map apps write them ("Heathrow Airport, Longford", read
        // fuzzily as Langford in Bedfordshire, 66 km off; "Luton Airport, Wigmore", Luton's
        // Wigmore, not Herefordshire's). The address stands only at the airport itself
        // ("Gatwick Airport (GTW)" is its station).
        if (
          addr?.ok &&
          first?.rec.kind === 'airport' &&
          first.rec.uk &&
          first.distance === 0 &&
          haversineMeters(addr.place, first.rec) > 5_000
        )
          return resultFor(query, first.rec, parsed.terminal ?? wholeTerminal, worldwide);
        if (addr?.ok) return addr;
        if (first) return placeResult(first.rec, parsed.terminal ?? wholeTerminal);
      }
    }

    const addr = resolveAddress(query, segments, worldwide, wholeTerminal);
    if (addr) return addr;
    return notFound(query);
  };

  // Journeys repeat their places (stations, airports, city centres): each distinct query text
  // is resolved once and kept, up to CACHE_SIZE entries, the oldest dropped first. Results are
  // copied out, so a caller changing one cannot change the cache.
  const cache = new Map<string, GeocodeResult>();
  const cached = (query: string, opts: GeocodeOptions = {}): GeocodeResult => {
    const key = `${opts.worldwide === true ? 'w' : 'u'}${query}`;
    let result = cache.get(key);
    if (!result) {
      result = resolve(query, opts);
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      cache.set(key, result);
    }
    return result.ok ? { ok: true, place: { ...result.place } } : { ...result };
  };

  return {
    geocode: async (query, opts) => cached(query, opts),
    geocodeSync: cached,
    nearestDistrict: (lat, lng) => locator.nearest(lat, lng),
    district: (code) => locator.get(code.replace(/\s+/g, '').toUpperCase()),
    stats: { records: recs.length, names: keyList.length },
  };
}
