/**
 * The folders' arrows (docs/ARCHITECTURE.md, STYLE 15), checked on the source. Every import is an
 * arrow: `import type`, `import { type A }`, `export … from`, a side-effect import and `import('…')`
 * (a `typeof import('…')` type too), so a circle of types is a circle. Asserted: no import cycle
 * between modules; every relative import names a file; dialects/ imports only errors/; the floor
 * (domain, errors, http, net, storage, gateways, and what they may lean on) imports nothing above
 * it; only api/ (and app.ts, main.ts) imports Elysia; the tables a feature plugs into import no
 * feature; no source file is over 600 lines.
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

type Token = { kind: 'word' | 'string' | 'punctuation'; text: string }

/** After these a `/` opens a regular expression rather than dividing. */
const beforeExpression = new Set(['return', 'typeof', 'case', 'do', 'else', 'in', 'of', 'new', 'delete', 'void', 'throw', 'instanceof', 'yield', 'await'])

/**
 * A module's words, strings and punctuation, with comments, template literals' text and regular
 * expressions skipped: enough to read its import and export declarations without being fooled by a
 * `from '…'` inside a string or a comment. A quoted string ends at its line's end (JSX text may hold
 * a lone apostrophe).
 */
function tokenize(text: string): Token[] {
  const tokens: Token[] = []
  const braces: boolean[] = [] // one per open `{`: whether it is a template literal's `${`
  let at = 0
  const skipTemplate = () => {
    while (at < text.length) {
      const char = text[at]
      if (char === '\\') at += 2
      else if (char === '`') return void at++
      else if (char === '$' && text[at + 1] === '{') {
        at += 2
        return void braces.push(true)
      } else at++
    }
  }
  while (at < text.length) {
    const char = text[at]!
    if (/\s/.test(char)) at++
    else if (text.startsWith('//', at)) at = text.includes('\n', at) ? text.indexOf('\n', at) : text.length
    else if (text.startsWith('/*', at)) at = text.includes('*/', at + 2) ? text.indexOf('*/', at + 2) + 2 : text.length
    else if (char === '"' || char === "'") {
      let value = ''
      at++
      while (at < text.length && text[at] !== char && text[at] !== '\n') {
        if (text[at] === '\\') value += text[++at] ?? ''
        else value += text[at]
        at++
      }
      at++
      tokens.push({ kind: 'string', text: value })
    } else if (char === '`') {
      at++
      skipTemplate()
      tokens.push({ kind: 'punctuation', text: '`' })
    } else if (/[\w$]/.test(char)) {
      const word = /^[\w$]+/.exec(text.slice(at, at + 200))![0]
      at += word.length
      tokens.push({ kind: 'word', text: word })
    } else if (char === '/' && (tokens.length === 0 || (tokens.at(-1)!.kind === 'punctuation' ? !/^[)\]}`]$/.test(tokens.at(-1)!.text) : beforeExpression.has(tokens.at(-1)!.text)))) {
      let inClass = false
      at++
      while (at < text.length && text[at] !== '\n' && (inClass || text[at] !== '/')) {
        if (text[at] === '\\') at++
        else if (text[at] === '[') inClass = true
        else if (text[at] === ']') inClass = false
        at++
      }
      at++
      while (at < text.length && /\w/.test(text[at]!)) at++
      tokens.push({ kind: 'punctuation', text: '/' })
    } else if (char === '{') {
      braces.push(false)
      tokens.push({ kind: 'punctuation', text: char })
      at++
    } else if (char === '}') {
      at++
      if (braces.pop()) skipTemplate()
      else tokens.push({ kind: 'punctuation', text: char })
    } else {
      tokens.push({ kind: 'punctuation', text: char })
      at++
    }
  }
  return tokens
}

type Import = { specifier: string; typeOnly: boolean }

/** The specifiers a module imports or re-exports, each with whether only types come through it. */
function importsOf(text: string): Import[] {
  const tokens = tokenize(text)
  const found: Import[] = []
  tokens.forEach((token, index) => {
    if (token.kind !== 'word' || (token.text !== 'import' && token.text !== 'export') || tokens[index - 1]?.text === '.') return
    const next = tokens[index + 1]
    if (token.text === 'import' && next?.text === '(') {
      const specifier = tokens[index + 2]
      if (specifier?.kind === 'string') found.push({ specifier: specifier.text, typeOnly: tokens[index - 1]?.text === 'typeof' })
      return
    }
    if (token.text === 'import' && next?.kind === 'string') return void found.push({ specifier: next.text, typeOnly: false })
    // `import [type] a, { b, type C } from`, `import * as a from`, `export [type] { a } from`, `export * [as a] from`
    let cursor = index + 1
    let typeOnly = false
    if (tokens[cursor]?.text === 'type' && tokens[cursor + 1]?.text !== 'from' && tokens[cursor + 1]?.text !== ',') {
      typeOnly = true
      cursor++
    }
    if (token.text === 'export' && tokens[cursor]?.text !== '{' && tokens[cursor]?.text !== '*') return
    let named: Token[][] | undefined
    let bindsValue = false
    for (;;) {
      const part = tokens[cursor]
      if (part?.text === '{') {
        const close = tokens.findIndex((candidate, position) => position > cursor && candidate.text === '}')
        if (close === -1) return
        named = [[]]
        for (const inner of tokens.slice(cursor + 1, close)) {
          if (inner.text === ',') named.push([])
          else named.at(-1)!.push(inner)
        }
        cursor = close + 1
      } else if (part?.text === '*') {
        bindsValue = true
        cursor += tokens[cursor + 1]?.text === 'as' ? 3 : 1
      } else if (part?.kind === 'word' && part.text !== 'from') {
        bindsValue = true
        cursor++
      } else return
      if (tokens[cursor]?.text !== ',') break
      cursor++
    }
    const specifier = tokens[cursor + 1]
    if (tokens[cursor]?.text !== 'from' || specifier?.kind !== 'string') return
    const onlyTypesNamed = named !== undefined && named.every((names) => names.length === 0 || (names[0]!.text === 'type' && names.length > 1))
    found.push({ specifier: specifier.text, typeOnly: typeOnly || (!bindsValue && onlyTypesNamed) })
  })
  return found
}

type Edge = { target: string; typeOnly: boolean }

/** What a module imports: relative targets resolved to files (or left unresolved), packages by name. */
function moduleImports(file: string): { modules: Edge[]; unresolved: string[]; packages: string[] } {
  const modules: Edge[] = []
  const unresolved: string[] = []
  const packages: string[] = []
  for (const { specifier, typeOnly } of importsOf(readFileSync(file, 'utf8'))) {
    if (!specifier.startsWith('.')) {
      packages.push(specifier)
      continue
    }
    const base = normalize(join(dirname(file), specifier))
    const resolved = [`${base}.ts`, `${base}.tsx`, base, join(base, 'index.ts'), join(base, 'index.tsx')].find((candidate) => existsSync(candidate) && statSync(candidate).isFile())
    if (resolved) modules.push({ target: resolved, typeOnly })
    else unresolved.push(specifier)
  }
  return { modules, unresolved, packages }
}

const files = sourceFiles(src)
const graph = new Map(files.map((file) => [file, moduleImports(file)]))
const name = (file: string) => relative(src, file)
const arrow = (file: string, edge: Edge) => `${name(file)} → ${name(edge.target)}${edge.typeOnly ? ' (types only)' : ''}`

/** The strongly connected components with a circle in them (Tarjan), each sorted by name. */
function circlesOf(nodes: string[], next: (node: string) => string[]): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const connect = (node: string) => {
    index.set(node, index.size)
    low.set(node, index.get(node)!)
    stack.push(node)
    onStack.add(node)
    for (const target of next(node)) {
      if (!index.has(target)) {
        connect(target)
        low.set(node, Math.min(low.get(node)!, low.get(target)!))
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!))
    }
    if (low.get(node) !== index.get(node)) return
    const component: string[] = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== node)
    if (component.length > 1 || next(node).includes(node)) found.push(component.sort())
  }
  for (const node of nodes) if (!index.has(node)) connect(node)
  return found
}

/** One shortest circle through a component's first member (breadth first), to name in a failure. */
function shortestCircle(members: string[], next: (node: string) => string[]): string[] {
  const inside = new Set(members)
  const start = members[0]!
  const cameFrom = new Map<string, string>()
  const queue = [start]
  for (const node of queue) {
    for (const target of next(node)) {
      if (target === start) {
        const path = [node]
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!)
        return [...path, start]
      }
      if (inside.has(target) && !cameFrom.has(target)) {
        cameFrom.set(target, node)
        queue.push(target)
      }
    }
  }
  return [start]
}

/**
 * The floor and what it may import besides itself and packages (paths under src/; `../db/migrations/`
 * is outside it). config/ and observability/ are here because gateways/ may import them, and
 * worker-entry.ts because storage/ does: what the floor leans on stays on the floor.
 */
const floor: Record<string, string[]> = {
  'domain/': [],
  'errors/': ['domain/'],
  'http/': ['errors/', 'domain/'],
  'net/': ['errors/', 'domain/', 'http/'],
  'storage/': ['domain/', 'errors/', 'worker-entry.ts', '../db/migrations/'],
  'gateways/': ['storage/', 'domain/', 'errors/', 'net/', 'http/', 'config/', 'observability/'],
  'config/': ['observability/', 'domain/', 'errors/'],
  'observability/': ['config/', 'domain/', 'errors/'],
  'worker-entry.ts': [],
  'dialects/': ['errors/'],
}

/** The imports from `place` (a folder under src/ or a file at its root) to anything outside itself and what it may import. */
function importsBeyond(place: string, allowed: string[]): string[] {
  return files
    .filter((file) => name(file).startsWith(place))
    .flatMap((file) => graph.get(file)!.modules.filter((edge) => ![place, ...allowed].some((prefix) => name(edge.target).startsWith(prefix))).map((edge) => arrow(file, edge)))
}

describe('the architecture of src/', () => {
  test('every relative import names a file (the graph misses no arrow)', () => {
    const unresolved = files.flatMap((file) => graph.get(file)!.unresolved.map((specifier) => `${name(file)} → ${specifier}`))
    expect(unresolved).toEqual([])
  })

  test('no import cycle between modules', () => {
    const circles = circlesOf(files, (file) => graph.get(file)?.modules.map((edge) => edge.target) ?? [])
    expect(circles.map((members) => `${members.length} files: ${shortestCircle(members, (file) => graph.get(file)!.modules.map((edge) => edge.target)).map(name).join(' → ')}`)).toEqual([])
  })

  test('storage imports nothing above it (no management, gateways, pipeline, api or cluster)', () => {
    expect(importsBeyond('storage/', floor['storage/']!)).toEqual([])
  })

  const floorRows = Object.entries(floor).filter(([place]) => place !== 'storage/').map(([place, allowed]) => [place, allowed.join(', ') || 'nothing else', allowed] as const)
  test.each(floorRows)('%s imports only itself, packages and: %s', (place, _shown, allowed) => {
    expect(importsBeyond(place, [...allowed])).toEqual([])
  })

  test('only api/ (and the composition in app.ts and main.ts) imports Elysia', () => {
    const offending = files.filter((file) => graph.get(file)!.packages.some((target) => target === 'elysia' || target.startsWith('@elysiajs/')) && !/^(api\/|app\.ts$|main\.ts$)/.test(name(file)))
    expect(offending.map(name)).toEqual([])
  })

  test('the tables a feature plugs into import no feature: batch registers its endpoint and jobs itself', () => {
    const tables = ['pipeline/index.ts', 'scheduler/jobs.ts', 'scheduler/lease.ts', 'scheduler/worker.ts']
    const offending = tables.flatMap((table) => graph.get(join(src, table))!.modules.filter((edge) => name(edge.target).startsWith('batch/')).map((edge) => arrow(join(src, table), edge)))
    expect(offending).toEqual([])
  })

  test('no source file is over 600 lines', () => {
    const long = sourceFiles(src)
      .map((file) => ({ file, lines: readFileSync(file, 'utf8').replace(/\n$/, '').split('\n').length }))
      .filter(({ lines }) => lines > 600)
      .map(({ file, lines }) => `${name(file)}: ${lines} lines`)
    expect(long).toEqual([])
  })
})
