/**
 * A streamed upstream answer once it has begun. Its first bytes are read and checked before the
 * client's answer is committed, so a stream that stalls or sends something unusable before its
 * first byte fails over under the attempt's own timers (SPEC "Timeouts", "Failover reasons":
 * ttfb-timeout is no first byte). From then on the inter-chunk idle limit (RT_STREAM_IDLE_MS) is the
 * only clock on it: the request deadline never cuts a stream that has begun.
 */
import { SseRecordCheck } from './sse/check-records'

const now = () => performance.now()
const ignore = () => {}

/**
 * The idle limit of one stream: one timer per stream, re-armed only when it fires, against the time
 * of the last byte. Readers stamp `lastByteAt` on each chunk, so a chunk costs no timer work and no
 * allocation. When the limit passes with no byte, the attempt's request is aborted: the readers see
 * their read fail and end the stream with the dialect's failure (`stalled` tells them why).
 */
export class StreamIdleWatch {
  lastByteAt = 0
  /** The limit ended the stream. */
  stalled = false
  private timer: ReturnType<typeof setTimeout> | undefined = undefined
  private controller: AbortController | undefined = undefined

  constructor(readonly limitMs: number) {}

  /** The stream has begun: from now on, `limitMs` without a byte aborts `controller`. */
  start(controller: AbortController) {
    this.controller = controller
    this.lastByteAt = now()
    this.timer = setTimeout(checkIdle, this.limitMs, this)
  }

  /** The stream ended (or its reader let go): the timer goes. */
  stop() {
    this.controller = undefined
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  /** The timer fired: abort when the silence has lasted the limit, else wait for the rest of it. */
  check() {
    this.timer = undefined
    const controller = this.controller
    if (!controller) return
    const silentFor = now() - this.lastByteAt
    if (silentFor < this.limitMs) {
      this.timer = setTimeout(checkIdle, this.limitMs - silentFor, this)
      return
    }
    this.stalled = true
    this.controller = undefined
    controller.abort('stream-idle')
  }
}

/** The timer callback (a function taking the watch as its argument: no closure per stream). */
function checkIdle(watch: StreamIdleWatch) {
  watch.check()
}

/** A streamed answer whose first line has come and passed its check. */
export interface UpstreamBody {
  reader: ReadableStreamDefaultReader<Uint8Array>
  /** The chunks read before the answer was committed, as they came (usually one). */
  head: Uint8Array[]
  /** The whole, checked lines of `head`; `records` holds any unfinished last line. */
  checkedHead: Uint8Array
  /** The record check, fed with `head`: the same-dialect relay keeps feeding it. */
  records: SseRecordCheck
  watch: StreamIdleWatch | undefined
}

/** A content type that says the body is a page or a JSON document, not an event stream. */
const notAnEventStream = /html|json/i

/**
 * Reads a streamed 2xx answer up to its first whole line and checks it: the started body, or why it
 * cannot be used (a page or a JSON document instead of events, an empty body, a line that is not
 * SSE or a record that is not JSON). A read that fails throws, like any broken body.
 */
export async function startUpstreamBody(response: Response, watch: StreamIdleWatch | undefined): Promise<UpstreamBody | string> {
  const contentType = response.headers.get('content-type')
  if (contentType !== null && notAnEventStream.test(contentType)) {
    response.body?.cancel().catch(ignore)
    return /html/i.test(contentType) ? 'an HTML page where an event stream was expected' : 'a JSON document where an event stream was expected'
  }
  if (!response.body) return 'no body where an event stream was expected'
  const reader = response.body.getReader()
  const records = new SseRecordCheck()
  const head: Uint8Array[] = []
  for (;;) {
    const { value, done } = await reader.read()
    if (done) {
      if (head.length === 0) return 'the stream ended before its first byte'
      const last = records.end()
      return last === undefined ? records.problem! : { reader, head, checkedHead: last, records, watch }
    }
    if (value.byteLength === 0) continue
    head.push(value)
    const checked = records.feed(value)
    if (checked === undefined) {
      reader.cancel().catch(ignore)
      return records.problem!
    }
    if (checked.byteLength > 0) return { reader, head, checkedHead: checked, records, watch }
  }
}
