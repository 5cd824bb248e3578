/**
 * The tariff engine's inputs and outputs. The engine (shared/domain/tariffs/engine.ts) is a pure
 * function: no I/O, no clock; money in integer pence.
 */

export const VEHICLE_TYPES = [
  'saloon',
  'estate',
  'executive',
  'luxury',
  '5seater',
  '6seater',
  '7seater',
  'mpv',
  'wav',
] as const;
export type VehicleType = (typeof VEHICLE_TYPES)[number];

/**
 * Passengers each class carries. SPEC.md 2.1: "use mpv or 6seater and above for groups over 4",
 * so a `5seater` counts its seats with the driver's (4 passengers), `6seater` and `7seater` count
 * passenger seats, an MPV takes the largest party we book (8). A WAV carries a wheelchair user
 * and up to 3 companions (4).
 */
export const VEHICLE_SEATS: Record<VehicleType, number> = {
  saloon: 4,
  estate: 4,
  executive: 4,
  luxury: 4,
  '5seater': 4,
  '6seater': 6,
  '7seater': 7,
  mpv: 8,
  wav: 4,
};

export interface AppliedRule {
  /** Stable machine code: flag_fall, distance, waiting, night_surcharge, airport_pickup, meet_and_greet, class_multiplier, ... */
  code: string;
  description: string;
  amountPence: number;
}

export interface TariffSource {
  kind: 'council' | 'driver_override' | 'partner_rate' | 'default';
  /** Authority name ("Manchester City Council"), the rate card's owner, or "Direct Taxi Network default". */
  authority: string;
  /** The tariff applied ("T2 Night and Bank Holidays"). */
  tariff: string;
  /** Date the figures are stated to be in force from (YYYY-MM-DD), or the table's as-of text. */
  asOf: string;
}

/** An approved driver's or partner's own rates; overrides the council tariff for quotes made through them. */
export interface RateCard {
  kind: 'driver_override' | 'partner_rate';
  owner: string;
  asOf: string;
  perMilePence: number;
  minimumPence: number;
  /** Optional flag fall added to the distance charge. */
  flagFallPence?: number;
  /** Fixed prices between two places, matched by postcode district or IATA code on either end. */
  fixedRoutes?: Array<{ from: string; to: string; pricePence: number; bidirectional?: boolean }>;
}

export interface QuotePlace {
  kind: 'address' | 'postcode' | 'station' | 'airport' | 'place';
  localAuthorityCode: string | null;
  postcodeDistrict: string | null;
  iata?: string;
  /** National Rail CRS code when kind is station (e.g. MAN Manchester Piccadilly, MIA Manchester Airport): rank charges. */
  crs?: string;
  countryCode: string;
}

export interface FareInput {
  /** Tariff tables in force, keyed by nothing: the engine picks the one whose authority covers the pickup. */
  tables: readonly import('./table.ts').TariffTable[];
  pickup: QuotePlace;
  dropoff: QuotePlace;
  /** Departure instant (UTC); periods are evaluated in Europe/London. */
  departAt: Date;
  distanceMeters: number;
  durationSeconds: number;
  slowSeconds: number;
  /**
   * Of `distanceMeters`, the distance covered during `slowSeconds`. Below the changeover speed a
   * meter charges time instead of distance, so this stretch is charged by time only, never by
   * distance as well. Absent (0) for a meter reading whose distance is the distance charged.
   */
  slowMeters?: number;
  passengers: number;
  vehicleType: VehicleType;
  meetAndGreet: boolean;
  rateCard?: RateCard | null;
  /** Approved operator multipliers for premium classes, from configuration (e.g. executive 1.4). */
  classMultipliers: Partial<Record<VehicleType, number>>;
  /** Charge the table's booking fee (e.g. a telephone/app booking extra); off unless the caller asks. */
  chargeBookingFee?: boolean;
}

export interface FareResult {
  farePence: number;
  /** Always sums exactly to farePence. */
  appliedRules: AppliedRule[];
  tariffSource: TariffSource;
  warnings: string[];
}
