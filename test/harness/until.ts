/** Polls `probe` every 25 ms until it answers something other than undefined; fails after `limitMs`, naming `what`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, limitMs = 5000): Promise<T> {
  const started = Date.now()
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() - started > limitMs) throw new Error(`not within ${limitMs} ms: ${what}`)
    await Bun.sleep(25)
  }
}
