/**
 * Sandbox scenarios (test mode only): a test-mode booking may ask for a scenario, with the
 * `X-Test-Scenario` header or `scenario:<name>` in its notes, so integrators can exercise their
 * failure handling on purpose. Pure: what each scenario means for a simulated driver's next move.
 */
export const TEST_SCENARIOS = [
  'no_driver',
  'driver_declines_then_accepts',
  'driver_cancels',
  'partner_webhook_fails_twice',
] as const;
export type TestScenario = (typeof TEST_SCENARIOS)[number];

/** The request header that names a scenario. */
export const TEST_SCENARIO_HEADER = 'X-Test-Scenario';

/** The first attempts of a booking's first status webhook counted as failed by `partner_webhook_fails_twice`. */
export const SCENARIO_FAILED_WEBHOOK_ATTEMPTS = 2;

export function isTestScenario(s: unknown): s is TestScenario {
  return typeof s === 'string' && (TEST_SCENARIOS as readonly string[]).includes(s);
}

const IN_NOTES = new RegExp(`(?:^|[^a-z0-9_])scenario:\\s*(${TEST_SCENARIOS.join('|')})(?![a-z0-9_])`, 'i');

/** The scenario named in a booking's notes (`scenario:no_driver`), or null. */
export function scenarioInNotes(notes: string | null | undefined): TestScenario | null {
  if (!notes) return null;
  const m = IN_NOTES.exec(notes);
  return m?.[1] ? (m[1].toLowerCase() as TestScenario) : null;
}

/** What a simulated driver should do next with a test-mode job. */
export type SandboxMove = 'accept' | 'decline' | 'hand_back' | null;

/**
 * The move a scenario asks of the driver who sees the job: for an open offer, accept or decline;
 * for a job in hand, hand it back (or null: carry on). `declined` counts the booking's offers
 * declined so far (not counting hand-backs), `handedBack` the times a driver handed it back.
 * Null without a scenario: the simulator uses its configured probabilities.
 */
export function sandboxMove(
  scenario: TestScenario | null,
  state: 'offered' | 'held',
  history: { declined: number; handedBack: number },
): SandboxMove {
  if (scenario === null) return null;
  if (state === 'offered') {
    if (scenario === 'no_driver') return 'decline';
    if (scenario === 'driver_declines_then_accepts') return history.declined === 0 ? 'decline' : 'accept';
    return 'accept';
  }
  if (scenario === 'driver_cancels' && history.handedBack === 0) return 'hand_back';
  return null;
}
