import type { Request } from 'express';
import { isTestScenario, TEST_SCENARIO_HEADER, TEST_SCENARIOS, type TestScenario } from '../shared/domain/sandbox.ts';
import { AppError } from '../shared/errors.ts';

/**
 * The scenario a request asks for in its `X-Test-Scenario` header (test mode only). A live
 * request carrying the header is 400 (a live key used by mistake should not pass silently), as is
 * an unknown name. Without the header: null (a scenario may still be named in the notes,
 * `scenario:<name>`, which live bookings ignore).
 */
export function scenarioHeader(req: Request, testMode: boolean): TestScenario | null {
  const raw = req.get(TEST_SCENARIO_HEADER)?.trim();
  if (raw === undefined || raw === '') return null;
  if (!testMode) {
    throw new AppError('invalid_input', `${TEST_SCENARIO_HEADER} works only with a test-mode key (dtn_test_…).`, [
      { field: `/headers/${TEST_SCENARIO_HEADER.toLowerCase()}`, problem: 'only allowed in test mode' },
    ]);
  }
  const name = raw.toLowerCase();
  if (!isTestScenario(name)) {
    throw new AppError('invalid_input', `Unknown test scenario "${raw}": use one of ${TEST_SCENARIOS.join(', ')}.`, [
      {
        field: `/headers/${TEST_SCENARIO_HEADER.toLowerCase()}`,
        problem: `must be one of: ${TEST_SCENARIOS.join(', ')}`,
      },
    ]);
  }
  return name;
}
