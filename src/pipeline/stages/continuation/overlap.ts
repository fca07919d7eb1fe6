/**
 * The seam of a continued stream (CONTRACT §16): a continuation that repeats the end of what the
 * client already got has that overlap removed — the longest suffix of the sent text that starts the
 * new text. Only a suffix that begins where a word begins counts (the start of the text, a space or
 * punctuation before it or at its start, or a character of a script written without spaces): a
 * model that goes on mid-word ("ap" + "ples") shares a letter with the sent text by chance, and that
 * letter is not a repeat. The new text is held only while it may still be such a repeat.
 */

/** How far back a repeat is looked for (characters of the sent text). */
export const overlapWindow = 4096

const wordCharacter = /[\p{L}\p{N}_]/u
/** Scripts written without spaces between words: any character may begin one. */
const unspacedScript = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u

/** Whether a suffix of `text` may begin at `at`: where a word begins, or at a character that is not part of one. */
function beginsWord(text: string, at: number): boolean {
  if (at === 0) return true
  const code = text.charCodeAt(at)
  // Never inside a surrogate pair.
  if (code >= 0xdc00 && code <= 0xdfff) return false
  const here = String.fromCodePoint(text.codePointAt(at)!)
  if (!wordCharacter.test(here) || unspacedScript.test(here)) return true
  let before = text.charCodeAt(at - 1)
  let previous = text[at - 1]!
  if (before >= 0xdc00 && before <= 0xdfff && at >= 2) previous = text.slice(at - 2, at)
  return !wordCharacter.test(previous)
}

/** The sent text's suffixes a repeat may be, longest first. */
function candidateSuffixes(sent: string): string[] {
  const from = Math.max(0, sent.length - overlapWindow)
  const suffixes: string[] = []
  for (let at = from; at < sent.length; at++) if (beginsWord(sent, at)) suffixes.push(sent.slice(at))
  return suffixes
}

/**
 * The new text after a seam, with the repeat of the sent text's end removed. `feed` gives what may
 * go to the client now: undefined while the text so far may still be a repeat (it is held), else the
 * text without the repeat (possibly empty); after that the seam is done and text passes unchanged.
 */
export class Seam {
  private pending = ''
  private readonly suffixes: string[]

  constructor(sent: string) {
    this.suffixes = candidateSuffixes(sent)
  }

  feed(delta: string): string | undefined {
    this.pending += delta
    const pending = this.pending
    for (const suffix of this.suffixes) if (suffix.length > pending.length && suffix.startsWith(pending)) return undefined
    return this.settle()
  }

  /** The held text without its repeat (the stream goes on with something else, or ends). */
  settle(): string {
    const pending = this.pending
    this.pending = ''
    for (const suffix of this.suffixes) if (suffix.length <= pending.length && pending.startsWith(suffix)) return pending.slice(suffix.length)
    return pending
  }

  /** Whether text is held. */
  get holding(): boolean {
    return this.pending !== ''
  }
}
