/**
 * The service's icon, one small SVG that the portal and the API references serve beside their
 * pages (a page without one makes the browser ask for /favicon.ico and log a 404 on every page).
 */
export const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0b4f9c"/><path fill="#fff" d="M7 7h8v8H7zM17 7h8v8h-8zM7 17h8v8H7zM17 17h8v8h-8z" opacity=".92"/></svg>`
