import { AppError, type ErrorCode } from '../errors.ts';

/** A sync (or a connection check) that could not finish: its code and message become the connection's `error`. */
export class GitSyncError extends AppError {
  override readonly name = 'GitSyncError';
  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}) {
    super(code, message, details);
  }
}
