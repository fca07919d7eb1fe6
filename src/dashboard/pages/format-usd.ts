/** USD as the dashboard shows it: cents, or two significant digits below a cent ($0.00042). */
export const usd = (value: number) => `$${value === 0 ? '0' : value < 0.01 ? value.toPrecision(2) : value.toFixed(2)}`
