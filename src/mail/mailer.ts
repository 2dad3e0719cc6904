/**
 * Email, for the portal (address confirmation, password reset, invitations, operator notices).
 * With SMTP_URL, messages go through a pooled nodemailer SMTP transport; without it, outside
 * production, each message's recipient, subject and text are written to the log (so that a
 * developer can follow the link), and in production sending is refused: config.ts already
 * stops a portal that takes sign-ups without SMTP_URL from starting.
 *
 * Message bodies are never logged by the SMTP mailer: they carry single-use links.
 */
import { createTransport } from 'nodemailer'
import type { Config } from '../config/config.ts'

/** A recipient: a bare address, or a name and an address (the name is encoded by the transport, never spliced into a header). */
export type Recipient = string | { readonly name: string; readonly address: string }

export interface Message {
  readonly to: Recipient
  readonly subject: string
  readonly text: string
  readonly html: string
}

export interface Mailer {
  /** send resolves once the SMTP server has accepted the message; it rejects with a MailError. */
  send(message: Message): Promise<void>
  /** close ends the pooled connections (at shutdown). */
  close(): void
  /**
   * verify connects to the SMTP server, greets it and signs in (when SMTP_URL has credentials),
   * within the mailer's timeout, on a connection of its own; it rejects with a MailError. The
   * log mailer has none: there is no server to ask.
   */
  verify?(): Promise<void>
}

/** The part of the logger the mailer uses (pino's, as `app.log`). */
export interface MailLog {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

/** MailError: a message not sent, with the SMTP server's reply code when it refused it. */
export class MailError extends Error {
  override name = 'MailError'
  readonly responseCode: number | undefined
  constructor(message: string, options: { cause?: unknown; responseCode?: number | undefined } = {}) {
    super(message, { cause: options.cause })
    this.responseCode = options.responseCode
  }
}

/** Longest wait, in ms, for the connection, the server's greeting and any reply: a mail server that hangs must not hold a request. */
export const SMTP_TIMEOUT_MS = 10_000

type MailerConfig = Pick<Config, 'nodeEnv' | 'smtpUrl' | 'mailFrom'>

/** openMailer gives the SMTP mailer when SMTP_URL is set, else the log mailer. `timeoutMs` is for tests. */
export function openMailer(config: MailerConfig, log: MailLog, options: { timeoutMs?: number } = {}): Mailer {
  return config.smtpUrl === '' ? logMailer(config, log) : smtpMailer(config, log, options.timeoutMs ?? SMTP_TIMEOUT_MS)
}

/** countedMailer tells `metrics` of each message sent or not (the emails' outcomes). */
export function countedMailer(mailer: Mailer, metrics: { email(sent: boolean): void }): Mailer {
  return {
    async send(message) {
      try {
        await mailer.send(message)
      } catch (error) {
        metrics.email(false)
        throw error
      }
      metrics.email(true)
    },
    close: () => mailer.close(),
    // readyz asks the server through the same mailer: a check is no email, so it is not counted.
    ...(mailer.verify === undefined ? {} : { verify: () => mailer.verify!() }),
  }
}

const addressOf = (to: Recipient): string => (typeof to === 'string' ? to : to.address)

function smtpMailer(config: MailerConfig, log: MailLog, timeoutMs: number): Mailer {
  const transport = createTransport({
    url: config.smtpUrl,
    pool: true,
    maxConnections: 2,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    dnsTimeout: timeoutMs,
    // nodemailer's own logger would write the whole conversation, bodies included.
    logger: false,
    debug: false,
  })
  return {
    async send(message) {
      try {
        const info = await transport.sendMail({ from: config.mailFrom, to: message.to, subject: message.subject, text: message.text, html: message.html })
        log.info({ to: addressOf(message.to), subject: message.subject, messageId: info.messageId }, 'email sent')
      } catch (error) {
        const e = error as Error & { responseCode?: number; code?: string }
        // nodemailer's message names the server's reply ("550 …") or the socket error; never the body.
        throw new MailError(`Could not send the email "${message.subject}" to ${addressOf(message.to)}: ${e.message}`, {
          cause: error,
          responseCode: e.responseCode,
        })
      }
    },
    close() {
      transport.close()
    },
    async verify() {
      let timer: NodeJS.Timeout | undefined
      // nodemailer bounds each step (connection, greeting, each reply); this bounds the whole.
      const late = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
      })
      try {
        await Promise.race([transport.verify(), late])
      } catch (error) {
        throw new MailError(`The SMTP server check failed: ${(error as Error).message}`, { cause: error })
      } finally {
        clearTimeout(timer)
      }
    },
  }
}

function logMailer(config: MailerConfig, log: MailLog): Mailer {
  return {
    async send(message) {
      if (config.nodeEnv === 'production') {
        throw new MailError(`Could not send the email "${message.subject}" to ${addressOf(message.to)}: SMTP_URL is not set`)
      }
      // Development only: the text is logged on purpose, so that its link can be followed.
      log.warn({ to: addressOf(message.to), subject: message.subject, text: message.text }, 'email not sent (SMTP_URL is unset); its text follows')
    },
    close() {},
  }
}
