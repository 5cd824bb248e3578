import { describe, expect, it } from 'vitest';
import { londonTime } from '../api/pages/site.ts';
import { jobCardText } from '../shared/domain/dispatch/job-card.ts';
import { repeatedHourZone } from '../shared/domain/london-zone.ts';

describe('the hour that happens twice when British Summer Time ends', () => {
  it('names the zone of a time in it, and of no other', () => {
    // 31 Oct 2027: 01:00-02:00 runs in BST (00:00-01:00 UTC), then again in GMT (01:00-02:00 UTC).
    expect(repeatedHourZone(new Date('2027-10-31T00:30:00Z'))).toBe(' BST');
    expect(repeatedHourZone(new Date('2027-10-31T01:30:00Z'))).toBe(' GMT');
    expect(repeatedHourZone(new Date('2027-10-31T00:00:00Z'))).toBe(' BST');
    for (const other of [
      '2027-10-30T23:59:00Z', // 00:59 BST, before it
      '2027-10-31T02:00:00Z', // 02:00 GMT, after it
      '2027-03-28T00:30:00Z', // the spring change skips an hour: nothing repeats
      '2027-03-28T01:30:00Z',
      '2026-11-27T12:00:00Z',
      '2027-07-01T01:30:00Z',
    ]) {
      expect(repeatedHourZone(new Date(other)), other).toBe('');
    }
  });

  it('is shown on the pages and the job card, so two pickups 60 minutes apart do not read the same', () => {
    const first = new Date('2027-10-31T00:30:00Z');
    const second = new Date('2027-10-31T01:30:00Z');
    expect(londonTime(first)).toBe('Sun, 31 Oct 2027, 01:30 BST');
    expect(londonTime(second)).toBe('Sun, 31 Oct 2027, 01:30 GMT');
    expect(londonTime(new Date('2027-10-31T12:00:00Z'))).toBe('Sun, 31 Oct 2027, 12:00');
    const card = (pickupTime: Date) =>
      jobCardText({
        reference: 'DTN-7K3F9Q',
        pickupArea: 'Manchester Piccadilly station',
        dropoffArea: 'Manchester Airport',
        pickupTime,
        farePence: 2840,
        paymentMethod: 'cash',
        passengers: 2,
        vehicleType: 'saloon',
        meetAndGreet: false,
        expiresAt: new Date(pickupTime.getTime() - 3600_000),
        link: 'https://dtn.example/o/abc',
        tier: 1,
      });
    expect(card(first)).toContain('Sun 31 Oct 01:30 BST,');
    expect(card(second)).toContain('Sun 31 Oct 01:30 GMT,');
  });
});
