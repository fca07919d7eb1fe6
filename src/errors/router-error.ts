/** Inference errors as values: a code from the table, an optional detail message, optional headers. */
import { errorCodes, type ErrorCode } from './codes'

export class RouterError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    detail?: string,
    readonly extraHeaders?: Record<string, string>,
    /** Overrides the table status (relayed upstream statuses). */
    status?: number,
  ) {
    super(detail ?? errorCodes[code].message)
    this.status = status ?? errorCodes[code].status
  }
}
