/**
 * A key setting kept as JSON text in its column (the response cache's, continuation's): written as
 * the key object shows it (wire names, defaults filled in), read back through the same checks, so a
 * row that was edited by hand into something the checks refuse reads as off.
 */

/** What a setting is to its column: the checks a value must pass, and the value as the key object shows it. */
export interface SettingCodec<View> {
  /** Why a value is refused, naming the field; undefined when it is good (null is off, and good). */
  problem(value: unknown): string | undefined
  /** A value the checks accepted, as the key object shows it; null: off. */
  viewOf(value: unknown): View | null
}

/** The stored JSON of a value the checks accepted (null: off). A change replaces the whole setting. */
export function storedSetting<View>(codec: SettingCodec<View>, value: unknown): string | null {
  const view = codec.viewOf(value)
  return view ? JSON.stringify(view) : null
}

/** The stored JSON as the key object shows it; null when off (or the text is unreadable). */
export function presentStoredSetting<View>(codec: SettingCodec<View>, text: string | null | undefined): View | null {
  if (!text) return null
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return null
  }
  return value !== null && codec.problem(value) === undefined ? codec.viewOf(value) : null
}
