/** The seam of a continued stream (CONTRACT §16): the repeat of the sent text's end removed, and only a repeat. */
import { describe, expect, test } from 'bun:test'
import { Seam } from '../../src/pipeline/stages/continuation/overlap'

/** The new text as the client gets it, fed in these pieces (the rest passes once the seam is done). */
function through(sent: string, pieces: string[]): { out: string; heldAfter: number[] } {
  const seam = new Seam(sent)
  let out = ''
  let done = false
  const heldAfter: number[] = []
  pieces.forEach((piece, index) => {
    if (done) return void (out += piece)
    const given = seam.feed(piece)
    if (given === undefined) heldAfter.push(index)
    else {
      out += given
      done = true
    }
  })
  if (!done) out += seam.settle()
  return { out, heldAfter }
}

describe('Seam', () => {
  test.each([
    ['the longest repeated suffix is removed', 'The quick brown fox jum', ['brown fox jumps'], 'ps'],
    ['a repeat that starts with a space', 'Hello big', [' big world'], ' world'],
    ['a model that starts over: the whole sent text is the repeat', 'Once upon', ['Once upon a time'], ' a time'],
    ['no repeat', 'The sea is ', ['deep.'], 'deep.'],
    ['going on mid-word keeps a letter shared by chance', 'I like ap', ['ples'], 'ples'],
    ['going on mid-word, doubled letters', 'bookkee', ['eping'], 'eping'],
    ['a repeat of a partial last word', 'Hello wor', ['world!'], 'ld!'],
    ['a script without spaces: any character begins a word', '你好世', ['世界'], '界'],
    ['punctuation begins a repeat', 'Yes, and', [', and then'], ' then'],
  ])('%s', (_name, sent, pieces, expected) => {
    expect(through(sent, pieces).out).toBe(expected)
  })

  test('the new text is held only while it may still be a repeat', () => {
    const result = through('The quick brown fox', [' br', 'own', ' fox', ' ran'])
    expect(result.out).toBe(' ran')
    expect(result.heldAfter).toEqual([0, 1])
  })

  test('text held when the stream goes on with something else is settled without its repeat', () => {
    // "a b" repeats the end of "a b a b", and might still be the start of repeating all of it.
    const seam = new Seam('a b a b')
    expect(seam.feed('a b')).toBeUndefined()
    expect(seam.holding).toBe(true)
    expect(seam.settle()).toBe('')
    // A held start of a repeat that never completed is new text.
    const again = new Seam('The quick brown')
    expect(again.feed(' bro')).toBeUndefined()
    expect(again.settle()).toBe(' bro')
  })

  test('a held prefix that turns out not to repeat is given whole', () => {
    expect(through('The quick brown fox', [' bro', 'ad daylight'])).toEqual({ out: ' broad daylight', heldAfter: [0] })
  })

  test('never splits a surrogate pair', () => {
    expect(through('I saw 🦊', ['🦊 fox'])).toEqual({ out: ' fox', heldAfter: [] })
  })
})
