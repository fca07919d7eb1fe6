/**
 * The folders' arrows (docs/ARCHITECTURE.md), checked on the source: no import cycle between modules
 * (type-only imports aside), storage imports nothing above it, only api/ imports Elysia, and the
 * tables a feature plugs into (the pipeline's endpoints, the scheduler's jobs) import no feature.
 */
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'

const src = join(import.meta.dir, '../../src')

function sourceFiles(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })
}

const importLine = /^\s*import\s+(type\s+)?([^'"]*?)\s*from\s*['"]([^'"]+)['"]/gm

/** What a module imports for its values (not `import type`, nor `import { type A }` alone): relative targets resolved, packages by name. */
function valueImports(file: string): { modules: string[]; packages: string[] } {
  const text = readFileSync(file, 'utf8')
  const modules: string[] = []
  const packages: string[] = []
  for (const match of text.matchAll(importLine)) {
    if (match[1]) continue
    const names = match[2]!.trim()
    const braces = /^\{([^}]*)\}$/.exec(names)
    if (braces && braces[1]!.split(',').every((name) => name.trim() === '' || name.trim().startsWith('type '))) continue
    const target = match[3]!
    if (!target.startsWith('.')) {
      packages.push(target)
      continue
    }
    const base = normalize(join(dirname(file), target))
    const resolved = [`${base}.ts`, `${base}.tsx`, base, join(base, 'index.ts')].find((candidate) => existsSync(candidate) && statSync(candidate).isFile())
    if (resolved) modules.push(resolved)
  }
  return { modules, packages }
}

const files = sourceFiles(src)
const graph = new Map(files.map((file) => [file, valueImports(file)]))
const name = (file: string) => relative(src, file)

describe('the architecture of src/', () => {
  test('no import cycle between modules', () => {
    const state = new Map<string, 'open' | 'done'>()
    const cycles: string[] = []
    const visit = (file: string, path: string[]) => {
      state.set(file, 'open')
      for (const next of graph.get(file)?.modules ?? []) {
        if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next].map(name).join(' → '))
        else if (!state.has(next)) visit(next, [...path, next])
      }
      state.set(file, 'done')
    }
    for (const file of files) if (!state.has(file)) visit(file, [file])
    expect(cycles).toEqual([])
  })

  test('storage imports nothing above it (no management, gateways, pipeline, api or cluster)', () => {
    const offending = files
      .filter((file) => name(file).startsWith('storage/'))
      .flatMap((file) => graph.get(file)!.modules.filter((target) => /^(management|gateways|pipeline|api|cluster|batch|scheduler)\//.test(name(target))).map((target) => `${name(file)} → ${name(target)}`))
    expect(offending).toEqual([])
  })

  test('only api/ (and the composition in app.ts and main.ts) imports Elysia', () => {
    const offending = files.filter((file) => graph.get(file)!.packages.some((target) => target === 'elysia' || target.startsWith('@elysiajs/')) && !/^(api\/|app\.ts$|main\.ts$)/.test(name(file)))
    expect(offending.map(name)).toEqual([])
  })

  test('the tables a feature plugs into import no feature: batch registers its endpoint and jobs itself', () => {
    const tables = ['pipeline/index.ts', 'scheduler/jobs.ts', 'scheduler/lease.ts', 'scheduler/worker.ts']
    const offending = tables.flatMap((table) => graph.get(join(src, table))!.modules.filter((target) => name(target).startsWith('batch/')).map((target) => `${table} → ${name(target)}`))
    expect(offending).toEqual([])
  })
})
