/**
 * Text output of the conversion group: `json`, a JSON array of pages with their text;
 * `structured`, the same with blocks, lines and words instead; `text`, plain text with a form
 * feed after each page. Shared by the synchronous route and by jobs.
 */
export const TEXT_FORMATS = ['json', 'text', 'structured'] as const
export type TextFormat = (typeof TEXT_FORMATS)[number]
