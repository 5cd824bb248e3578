import { AppError } from '../../errors.ts';
import { VEHICLE_SEATS, VEHICLE_TYPES, type VehicleType } from './types.ts';

/** Vehicle types that seat a party, smallest first, in VEHICLE_TYPES order within a size. */
export function suitableVehicleTypes(passengers: number): VehicleType[] {
  return VEHICLE_TYPES.filter((v) => VEHICLE_SEATS[v] >= passengers).sort(
    (a, b) => VEHICLE_SEATS[a] - VEHICLE_SEATS[b],
  );
}

/** The party does not fit the vehicle type asked for. An AppError with code invalid_input (HTTP 400). */
export class SeatingError extends AppError {
  readonly suitableVehicleTypes: VehicleType[];
  constructor(
    readonly vehicleType: VehicleType,
    readonly passengers: number,
  ) {
    const seats = VEHICLE_SEATS[vehicleType];
    const suitable = suitableVehicleTypes(passengers);
    const general = suitable.filter((v) => v !== 'wav');
    const message =
      suitable.length === 0
        ? `No vehicle type seats ${passengers} passengers (a ${vehicleType} seats ${seats}; the largest, mpv, seats ${VEHICLE_SEATS.mpv}): split the party over several bookings.`
        : `A ${vehicleType} seats ${seats} passengers; for ${passengers} choose ${general.join(', ')}` +
          (suitable.includes('wav') ? ' (or wav for a wheelchair user).' : '.');
    super('invalid_input', message, [{ field: '/passengers', problem: message }]);
    this.name = 'SeatingError';
    this.suitableVehicleTypes = suitable;
  }
}

/** An input the engine cannot price (negative distance, invalid date, unknown vehicle type...). */
export class FareInputError extends AppError {
  constructor(field: string, problem: string) {
    super('invalid_input', `${field.slice(1)} ${problem}`, [{ field, problem }]);
    this.name = 'FareInputError';
  }
}
