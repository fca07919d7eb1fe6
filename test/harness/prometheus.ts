/**
 * Checks Prometheus text output against the naming and format conventions `promtool check metrics`
 * enforces (https://prometheus.io/docs/practices/naming/), in JS so the check runs everywhere, and
 * runs `promtool` itself when it is on PATH.
 */

export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Family {
  name: string
  help: string | undefined
  type: string | undefined
  samples: Sample[]
}

export interface Exposition {
  families: Map<string, Family>
  /** Every convention broken, one sentence each; empty when the text is clean. */
  problems: string[]
}

const namePattern = /^[a-z_:][a-z0-9_:]*$/
const labelNamePattern = /^[a-z_][a-z0-9_]*$/
/** Unit words that are not base units, or abbreviations of units (promtool lints both). */
const nonBaseUnit = /(^|_)(ms|us|ns|millis|milliseconds|microseconds|nanoseconds|minutes|hours|days|kb|mb|gb|kilobytes|megabytes|gigabytes|percent)(_|$)/
const histogramSuffixes = ['_bucket', '_sum', '_count']

function parseLabels(text: string, problems: string[], line: string): Record<string, string> {
  const labels: Record<string, string> = {}
  const pattern = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y
  let index = 0
  while (index < text.length) {
    pattern.lastIndex = index
    const match = pattern.exec(text)
    if (!match) {
      problems.push(`unparsable labels in: ${line}`)
      return labels
    }
    const [, name, value] = match
    if (!labelNamePattern.test(name!)) problems.push(`label name ${name} is not snake_case: ${line}`)
    if (name! in labels) problems.push(`label ${name} repeated: ${line}`)
    labels[name!] = value!.replace(/\\(["\\n])/g, (_whole, escaped: string) => (escaped === 'n' ? '\n' : escaped))
    index = pattern.lastIndex
  }
  return labels
}

/** The family a sample belongs to: a histogram's `_bucket`/`_sum`/`_count` go to the histogram. */
function familyOf(sampleName: string, families: Map<string, Family>): Family | undefined {
  const exact = families.get(sampleName)
  if (exact && exact.type !== 'histogram') return exact
  for (const suffix of histogramSuffixes) {
    if (!sampleName.endsWith(suffix)) continue
    const family = families.get(sampleName.slice(0, -suffix.length))
    if (family?.type === 'histogram') return family
  }
  return exact
}

export function parseExposition(text: string): Exposition {
  const families = new Map<string, Family>()
  const problems: string[] = []
  /** The family whose HELP/TYPE block is being read: its samples must follow it, together. */
  let current: Family | undefined
  if (!text.endsWith('\n')) problems.push('the text does not end with a newline')
  for (const line of text.split('\n')) {
    if (line === '') continue
    const comment = /^# (HELP|TYPE) ([^ ]+) ?(.*)$/.exec(line)
    if (comment) {
      const [, kind, name, rest] = comment
      let family = families.get(name!)
      if (family && family !== current) problems.push(`family ${name} appears in more than one block`)
      if (!family) families.set(name!, (family = { name: name!, help: undefined, type: undefined, samples: [] }))
      current = family
      if (kind === 'HELP') {
        if (family.help !== undefined) problems.push(`duplicate HELP for ${name}`)
        family.help = rest
      } else {
        if (family.type !== undefined) problems.push(`duplicate TYPE for ${name}`)
        if (family.samples.length > 0) problems.push(`TYPE for ${name} after its samples`)
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest!)) problems.push(`unknown TYPE ${rest} for ${name}`)
        family.type = rest
      }
      continue
    }
    if (line.startsWith('#')) continue
    const sample = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!sample) {
      problems.push(`unparsable sample line: ${line}`)
      continue
    }
    const [, sampleName, labelText, valueText] = sample
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : Number(valueText)
    if (Number.isNaN(value) && valueText !== 'NaN') problems.push(`value is not a number: ${line}`)
    const family = familyOf(sampleName!, families)
    if (!family || family !== current) {
      problems.push(`sample ${sampleName} is not under its own HELP/TYPE block`)
      // A stray sample ends the block it interrupts.
      current = undefined
      continue
    }
    family.samples.push({ name: sampleName!, labels: labelText ? parseLabels(labelText, problems, line) : {}, value })
  }

  for (const family of families.values()) {
    const { name, type } = family
    if (!namePattern.test(name)) problems.push(`metric name ${name} is not snake_case`)
    if (family.help === undefined || family.help === '') problems.push(`no HELP for ${name}`)
    if (type === undefined) problems.push(`no TYPE for ${name}`)
    if (nonBaseUnit.test(name)) problems.push(`metric name ${name} uses a non-base or abbreviated unit`)
    if (type === 'counter' && !name.endsWith('_total')) problems.push(`counter ${name} does not end in _total`)
    if (type !== 'counter' && name.endsWith('_total')) problems.push(`${type} ${name} ends in _total, which is for counters`)
    if (type === 'histogram') problems.push(...histogramProblems(family))
  }
  return { families, problems }
}

/** Buckets ordered by `le`, cumulative, ending in +Inf equal to `_count`, with a `_sum`. */
function histogramProblems(family: Family): string[] {
  const problems: string[] = []
  const series = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>()
  for (const sample of family.samples) {
    const { le, ...rest } = sample.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    let entry = series.get(key)
    if (!entry) series.set(key, (entry = { buckets: [] }))
    if (sample.name === `${family.name}_bucket`) {
      if (le === undefined) problems.push(`${family.name}_bucket without le`)
      else entry.buckets.push([le === '+Inf' ? Infinity : Number(le), sample.value])
    } else if (sample.name === `${family.name}_sum`) entry.sum = sample.value
    else if (sample.name === `${family.name}_count`) entry.count = sample.value
    else problems.push(`unexpected sample ${sample.name} in histogram ${family.name}`)
  }
  for (const [key, entry] of series) {
    const where = `${family.name} ${key}`
    if (entry.buckets.length === 0 || entry.buckets.at(-1)![0] !== Infinity) problems.push(`${where}: no +Inf bucket last`)
    for (let index = 1; index < entry.buckets.length; index++) {
      const [bound, count] = entry.buckets[index]!
      const [previousBound, previousCount] = entry.buckets[index - 1]!
      if (!(bound > previousBound)) problems.push(`${where}: le ${bound} does not increase`)
      if (count < previousCount) problems.push(`${where}: bucket le=${bound} is not cumulative`)
    }
    if (entry.sum === undefined) problems.push(`${where}: no _sum`)
    if (entry.count === undefined) problems.push(`${where}: no _count`)
    else if (entry.buckets.length > 0 && entry.buckets.at(-1)![1] !== entry.count) problems.push(`${where}: +Inf bucket differs from _count`)
  }
  return problems
}

/**
 * `promtool check metrics` on the text: its findings, or undefined (with a printed note) when
 * promtool is not installed (Debian: `apt-get install prometheus`).
 */
export async function promtoolFindings(text: string): Promise<{ exitCode: number; output: string } | undefined> {
  const promtool = Bun.which('promtool')
  if (!promtool) {
    console.log('note: promtool is not on PATH; skipping `promtool check metrics` (the JS convention checks still ran)')
    return undefined
  }
  const child = Bun.spawn([promtool, 'check', 'metrics'], { stdin: new Blob([text]), stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, exitCode] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { exitCode, output: (stdout + stderr).trim() }
}
