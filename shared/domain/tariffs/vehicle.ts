import { AppError } from '../../errors.ts';
import { anyCaseKey } from '../any-case.ts';
import { VEHICLE_TYPES, type VehicleType } from './types.ts';

/** A vehicle class as callers type it ("MPV", "6 seater", "6-seater", "6_seater"): 400 invalid_input naming the field when unknown. */
export function parseVehicleType(raw: string | undefined, field = '/vehicleType'): VehicleType | undefined {
  if (raw === undefined) return undefined;
  const v = anyCaseKey(raw);
  if ((VEHICLE_TYPES as readonly string[]).includes(v)) return v as VehicleType;
  throw new AppError('invalid_input', `Unknown vehicle type "${raw}".`, [
    { field, problem: `must be one of: ${VEHICLE_TYPES.join(', ')}` },
  ]);
}
