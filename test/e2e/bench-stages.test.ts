/**
 * The per-stage micro-benchmarks (`bun run bench --stages`, bench/stages.ts) keep running against
 * the pipeline as it changes: every stage of the hot path measured, with a time and a heap figure.
 */
import { expect, test } from 'bun:test'
import { benchTableRows } from '../harness/bench-table'

test('bun run bench --stages prints every stage of the hot path in ns/op and bytes/op', () => {
  const rows = benchTableRows(['--stages'], 'stage')
  expect(rows.map(([stage]) => stage)).toEqual([
    'authenticate (token cache warm)',
    'request context',
    'body read + parse (~1 KB)',
    'body parse only (bytes in hand)',
    'plan (uncached)',
    'upstream request build',
    'reply check (scan, no parse)',
    'usage read (body tail)',
    'response + headers',
    'log enqueue (journal record) + metrics',
    'limits: admit + settle (a key with limits only)',
    'cache: a miss (a key with a cache only)',
    'guardrails: the personal-data set over a 1 KB prompt (scan + mask)',
    'traces on: request span + one attempt span (100% sampled)',
  ])
  for (const [stage, ns, bytes] of rows) {
    expect([stage, Number(ns) > 0]).toEqual([stage, true])
    expect([stage, Number.isFinite(Number(bytes))]).toEqual([stage, true])
  }
}, 120_000)
