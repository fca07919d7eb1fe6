/** The operator CLI run against a test server's data, as an operator runs it (its own process). */
import { testMasterKey, type TestServer } from './server'
import { baseEnvironment, repoRoot } from './service-process'

/** `./scripts/cli <args>` on the server's data dir: its exit code, its JSON answer and its error line's message. */
export async function runCli(server: TestServer, args: string[]): Promise<{ exitCode: number; out: any; error: string | undefined }> {
  const child = Bun.spawn(['bun', 'run', 'src/cli/index.ts', ...args], {
    cwd: repoRoot,
    env: { ...baseEnvironment(), RT_DATA_DIR: server.dataDir, RT_MASTER_KEY: testMasterKey },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { exitCode, out: stdout.trim() ? JSON.parse(stdout) : undefined, error: stderr.trim() ? (JSON.parse(stderr.trim().split('\n')[0]!).error as string) : undefined }
}
