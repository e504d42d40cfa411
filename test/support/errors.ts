/** The coded error a piece of code ends with, for tests that look into it. */
import { AppError } from '../../src/domain/problems.js';

/** The AppError `fn` throws; fails the test when it throws nothing or something uncoded. */
export function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
}

/** The AppError `p` rejects with; fails the test when it resolves or rejects with something uncoded. */
export async function rejected(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError');
}
