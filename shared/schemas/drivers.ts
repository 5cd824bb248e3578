import { type Static, Type } from '@sinclair/typebox';
import type { FieldKind } from '../domain/content-screen.ts';
import { VEHICLE_TYPES } from '../domain/tariffs/types.ts';
import { ScreenedText, StringEnum, Uuid } from './common.ts';

/**
 * Free text the application's content screen reads (`screenApplication`): over its length it is
 * refused as the screen refuses it, 400 `content_rejected` naming the field.
 */
const Text = (kind: FieldKind, max: number, description: string) =>
  ScreenedText(kind, { nonEmpty: true, max, description });

/** A place the geocoder resolves: a UK town or city, a postcode, a station or an airport. */
const PlaceText = (description: string) => Text('address', 200, description);

export const DriverCorridor = Type.Object({
  from: PlaceText('One end of the corridor: a UK town or city, postcode, station or airport ("Manchester")'),
  to: PlaceText('The other end ("London")'),
  bufferMiles: Type.Number({
    minimum: 1,
    maximum: 50,
    description: 'How far either side of the corridor the driver takes pickups, in miles (1 to 50)',
  }),
});
export type DriverCorridor = Static<typeof DriverCorridor>;

export const DriverVehicle = Type.Object({
  make: Text('name', 40, 'Manufacturer, e.g. "Toyota"'),
  model: Text('name', 60, 'Model, e.g. "Corolla"'),
  colour: Text('name', 30, 'Colour as a passenger would describe it, e.g. "Silver"'),
  registration: {
    ...ScreenedText('reference', { max: 16, description: 'Registration mark as on the plate, e.g. "AB12 CDE"' }),
    minLength: 2,
  },
  class: StringEnum(VEHICLE_TYPES, {
    anyCase: true,
    description: 'Vehicle class, from the v1 vehicle list, in any case ("MPV")',
  }),
  seats: Type.Integer({ minimum: 1, maximum: 16, description: 'Passenger seats (1 to 16)' }),
  wheelchairAccessible: Type.Boolean({ description: 'Carries a passenger in a wheelchair (required for class wav)' }),
});
export type DriverVehicle = Static<typeof DriverVehicle>;

/**
 * POST /api/public/v1/drivers/apply (CONTRACT.md section 6). Lengths are bounded here; the
 * service checks what a schema cannot: the places resolve, the phone number and e-mail are
 * real-looking, the licence has not expired, the payment link is https, and free text carries
 * application details only (content screen).
 */
export const DriverApplyRequest = Type.Object({
  name: Text('name', 100, "The driver's full name"),
  phone: Type.String({
    minLength: 5,
    maxLength: 32,
    description: 'Mobile number, international format (+447700900123); UK numbers as typed are accepted',
  }),
  email: Type.String({ minLength: 3, maxLength: 254, description: "The driver's e-mail address" }),
  licensingAuthority: Text(
    'name',
    100,
    'The council that issued the private hire or hackney licence, e.g. "Manchester"',
  ),
  licenceNumber: Text('reference', 40, 'The driver licence number issued by that authority'),
  licenceExpiry: Type.String({
    format: 'date',
    description: 'Expiry date of the driver licence, YYYY-MM-DD; an expired licence is refused',
  }),
  vehicle: DriverVehicle,
  homeCity: PlaceText('Where the driver is based: a UK town or city, postcode, station or airport'),
  operatingRadiusMiles: Type.Number({
    minimum: 1,
    maximum: 100,
    description: 'How far from homeCity the driver takes local pickups, in miles (1 to 100)',
  }),
  nationalNetwork: Type.Optional(
    Type.Object(
      {
        corridors: Type.Array(DriverCorridor, {
          maxItems: 10,
          description: 'Up to 10 routes the driver also covers; any corridor joins the national network',
        }),
      },
      { description: 'Long-distance work along corridors beyond the home area' },
    ),
  ),
  paymentLink: Type.Optional(
    Text('link', 300, "The driver's own https payment link, shown to passengers who pay the driver directly"),
  ),
});
export type DriverApplyRequest = Static<typeof DriverApplyRequest>;

export const DriverApplyResponse = Type.Object({
  driverId: Uuid,
  status: Type.Literal('pending_approval'),
});
export type DriverApplyResponse = Static<typeof DriverApplyResponse>;
