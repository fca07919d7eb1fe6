/** Files imported with `with { type: 'text' }` (their contents) or `with { type: 'file' }` (a path that works in a one-file build too). */
declare module '*.sql' {
  const text: string
  export default text
}

declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  const path: string
  export default path
}
declare module '*.css' {
  const path: string
  export default path
}
declare module '*.svg' {
  const text: string
  export default text
}
declare module '*.png' {
  const path: string
  export default path
}
