/**
 * Where a Worker's code is: beside the module that starts it in a checkout, and in a one-file
 * build (`bun run build`, which lists each worker as an entry point) by its path under src/, the
 * build's root — there a module's own URL names the program, not its file.
 */
export function workerEntry(beside: URL, underSrc: string): string {
  return Bun.isStandaloneExecutable ? underSrc : beside.href
}
