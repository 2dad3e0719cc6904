// The page's side of passkeys with Tessera: ask the backend (server.mjs) for options, hand them to
// navigator.credentials, send the browser's answer back. The browser's JSON methods
// (PublicKeyCredential.parseCreationOptionsFromJSON / parseRequestOptionsFromJSON, credential.toJSON())
// are used where the browser has them, and the small base64url fallback below where it has not.
'use strict'

/** b64: base64url text to bytes, and back. */
const b64 = {
  decode(text) {
    const base64 = text.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(text.length / 4) * 4, '=')
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer
  },
  encode(buffer) {
    const bytes = new Uint8Array(buffer)
    let binary = ''
    for (const byte of bytes) binary += String.fromCharCode(byte)
    return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
  },
}

const descriptors = (list) => (list ?? []).map((d) => ({ ...d, id: b64.decode(d.id) }))

/** creationOptions: the options for navigator.credentials.create(), from their JSON. */
function creationOptions(json) {
  if (typeof PublicKeyCredential.parseCreationOptionsFromJSON === 'function') return PublicKeyCredential.parseCreationOptionsFromJSON(json)
  return { ...json, challenge: b64.decode(json.challenge), user: { ...json.user, id: b64.decode(json.user.id) }, excludeCredentials: descriptors(json.excludeCredentials) }
}

/** requestOptions: the options for navigator.credentials.get(), from their JSON. */
function requestOptions(json) {
  if (typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function') return PublicKeyCredential.parseRequestOptionsFromJSON(json)
  return { ...json, challenge: b64.decode(json.challenge), allowCredentials: descriptors(json.allowCredentials) }
}

/** answer: the browser's credential as JSON (what Tessera verifies). */
function answer(credential) {
  if (typeof credential.toJSON === 'function') return credential.toJSON()
  const r = credential.response
  const response = { clientDataJSON: b64.encode(r.clientDataJSON) }
  if (r.attestationObject !== undefined) {
    response.attestationObject = b64.encode(r.attestationObject)
    if (typeof r.getTransports === 'function') response.transports = r.getTransports()
  } else {
    response.authenticatorData = b64.encode(r.authenticatorData)
    response.signature = b64.encode(r.signature)
    response.userHandle = r.userHandle === null ? null : b64.encode(r.userHandle)
  }
  return {
    id: credential.id,
    rawId: b64.encode(credential.rawId),
    type: credential.type,
    response,
    clientExtensionResults: credential.getClientExtensionResults(),
    ...(credential.authenticatorAttachment ? { authenticatorAttachment: credential.authenticatorAttachment } : {}),
  }
}

/** call posts JSON to the backend: its status and JSON body. */
async function call(path, body = {}) {
  const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.status, body: await res.json() }
}

const $ = (id) => document.getElementById(id)
const say = (text) => {
  $('message').textContent = text
}
const signedIn = (userID) => {
  $('who').textContent = userID === null ? 'Not signed in.' : `Signed in as ${userID}.`
}

/** The autofill sign-in waiting in the background, ended before any other ceremony starts (a browser runs one at a time). */
let autofill = null

function stopAutofill() {
  autofill?.abort()
  autofill = null
}

/** register: options, navigator.credentials.create(), then the answer. */
async function register(userID, userName, label) {
  stopAutofill()
  const o = await call('/api/register/options', { userID, userName })
  if (o.status !== 200) return o
  let credential
  try {
    credential = await navigator.credentials.create({ publicKey: creationOptions(o.body.options) })
  } catch (e) {
    return { status: 0, body: { error: e.name, message: 'The browser did not make a passkey.' } }
  }
  return call('/api/register', { credential: answer(credential), label })
}

/** signIn: options (for a user, or for none: any passkey of this site), navigator.credentials.get(), then the answer. */
async function signIn(userID, mediation, signal) {
  const o = await call('/api/sign-in/options', userID === null ? {} : { userID })
  if (o.status !== 200) return o
  let credential
  try {
    credential = await navigator.credentials.get({ publicKey: requestOptions(o.body.options), ...(mediation ? { mediation } : {}), ...(signal ? { signal } : {}) })
  } catch (e) {
    return { status: 0, body: { error: e.name, message: 'The browser did not sign in.' } }
  }
  const done = await call('/api/sign-in', { credential: answer(credential) })
  // A passkey this site no longer has (deleted here): the browser may forget it, so it is not offered again.
  if (done.body.error === 'PASSKEY_UNKNOWN' && typeof PublicKeyCredential.signalUnknownCredential === 'function') {
    PublicKeyCredential.signalUnknownCredential({ rpId: o.body.options.rpId, credentialId: credential.id }).catch(() => {})
  }
  return done
}

/** show: what a ceremony came to, on the page. */
function show(result, what) {
  if (result.status >= 200 && result.status < 300) {
    signedIn(result.body.userID)
    say(`${what}: done.`)
  } else {
    say(`${what}: ${result.body.message ?? result.body.error} (${result.body.error})`)
  }
  return result
}

/** startAutofill offers this site's passkeys in the user ID field's autofill, where the browser can (conditional mediation). */
async function startAutofill() {
  if (typeof PublicKeyCredential.isConditionalMediationAvailable !== 'function' || !(await PublicKeyCredential.isConditionalMediationAvailable())) return
  const controller = new AbortController()
  autofill = controller
  const result = await signIn(null, 'conditional', controller.signal)
  if (controller.signal.aborted || result.body.error === 'NotAllowedError') return
  show(result, 'Sign-in')
}

// What a test (or your own script) may call.
window.passkeys = { register, signIn, answer, stopAutofill }

document.addEventListener('DOMContentLoaded', async () => {
  if (typeof window.PublicKeyCredential !== 'function') {
    $('unsupported').hidden = false
    for (const button of document.querySelectorAll('button')) button.disabled = true
    return
  }
  $('register').addEventListener('submit', async (event) => {
    event.preventDefault()
    show(await register($('register-user').value, $('register-name').value || undefined), 'Registration')
  })
  $('sign-in').addEventListener('submit', async (event) => {
    event.preventDefault()
    stopAutofill()
    const userID = $('sign-in-user').value
    show(await signIn(userID === '' ? null : userID), 'Sign-in')
  })
  $('discover').addEventListener('click', async () => {
    stopAutofill()
    show(await signIn(null), 'Sign-in')
  })
  $('sign-out').addEventListener('click', async () => {
    show(await call('/api/sign-out'), 'Sign-out')
  })
  signedIn((await call('/api/me')).body.userID)
  startAutofill()
})
