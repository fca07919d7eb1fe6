/**
 * Money as the service counts it (CONTRACT §11 "Money is counted exactly"): whole nano-dollars
 * (billionths of a USD) in the limits' ledger, the request-log rows and every sum, so adding and
 * taking away never drifts; USD only where a value is shown. A plain number holds nano-dollars
 * exactly up to about $9 million, far beyond any one key's day or month.
 */

export const nanoUsdPerUsd = 1_000_000_000

/** USD → whole nano-dollars, to the nearest. */
export function usdToNano(usd: number): number {
  return Math.round(usd * nanoUsdPerUsd)
}

/** USD → whole nano-dollars, rounded up (a reservation, a worst case: never below the value). */
export function usdToNanoUp(usd: number): number {
  // A product like 11 × 0.000001 lands a hair above its integer (11000.000000000002): rounded to a
  // millionth of a nano-dollar first, so only a real fraction rounds up.
  return Math.ceil(Math.round(usd * nanoUsdPerUsd * 1e6) / 1e6)
}

/** Nano-dollars → USD as shown (null stays null: unknown). */
export function nanoToUsd(nano: number): number
export function nanoToUsd(nano: number | null): number | null
export function nanoToUsd(nano: number | null): number | null {
  return nano === null ? null : nano / nanoUsdPerUsd
}
