// The wire contract of pi-post v1: addresses, the strict JSON reader, message
// and record files. Pure: no file system here.
import { createHash } from "node:crypto";

export const BODY_CAP = 32768;
// A body byte can be spelled as six in JSON ("\u00e9" for one byte of é's two),
// plus room for the envelope: the most a valid letter file can weigh.
export const LETTER_LIMIT = 6 * BODY_CAP + 64 * 1024;
export const RECORD_LIMIT = 64 * 1024;
const MAX_DEPTH = 32; // a letter nests two deep; anything far past that is hostile

const ADDRESS = /^s-[0-9a-f]{12}$/;
const ID = /^[0-9]{13}-[0-9a-f]{8}$/;

export function reason(code, text, facts = {}) {
  return { code, text, ...facts };
}

// -- addresses ---------------------------------------------------------------

export function addressOf(sessionId) {
  const hash = createHash("sha256").update(Buffer.from(`session\0${sessionId}`, "utf8"));
  return `s-${hash.digest("hex").slice(0, 12)}`;
}

export const isAddress = (text) => typeof text === "string" && ADDRESS.test(text);

// An unnamed session goes by its directory's basename and four hex digits of its address.
export function defaultName(cwd, address) {
  const parts = cwd.split("/").filter(Boolean);
  const base = parts.length ? parts[parts.length - 1] : "root";
  return `${base}-${address.slice(2, 6)}`;
}

// -- a strict, bounded JSON reader ---------------------------------------------
// JSON.parse keeps the last of duplicated keys, reads 1.0 as 1 and recurses
// without a bound, so letters and records get a reader of their own.

class Float {
  // a number spelled with a fraction or an exponent (or too large to be exact): never an integer field
  constructor(value) {
    this.value = value;
  }
  toJSON() {
    return this.value;
  }
}

class Unreadable extends Error {
  constructor(reasonValue) {
    super(reasonValue.text);
    this.reason = reasonValue;
  }
}

export function readJson(text) {
  let at = 0;
  const fail = (why) => {
    throw new Unreadable(reason("not_json", `not JSON: ${why} at character ${at}`));
  };
  const space = () => {
    while (at < text.length) {
      const c = text.charCodeAt(at);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) at++;
      else break;
    }
  };
  const value = (depth) => {
    space();
    const c = text[at];
    if (c === "{" || c === "[") {
      if (depth >= MAX_DEPTH) {
        throw new Unreadable(reason("too_deep", `JSON nested deeper than ${MAX_DEPTH} levels`));
      }
      return c === "{" ? object(depth + 1) : array(depth + 1);
    }
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    for (const [word, meaning] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return meaning;
      }
    }
    return fail(at >= text.length ? "unexpected end" : "unexpected character");
  };
  const object = (depth) => {
    at++;
    const found = {};
    space();
    if (text[at] === "}") {
      at++;
      return found;
    }
    for (;;) {
      space();
      if (text[at] !== '"') fail("expected a key");
      const key = string();
      if (Object.hasOwn(found, key)) {
        throw new Unreadable(reason("duplicate_key", `duplicate key ${JSON.stringify(key)}`, { key }));
      }
      space();
      if (text[at] !== ":") fail("expected ':'");
      at++;
      Object.defineProperty(found, key, { value: value(depth), enumerable: true, writable: true, configurable: true });
      space();
      if (text[at] === ",") at++;
      else if (text[at] === "}") {
        at++;
        return found;
      } else fail("expected ',' or '}'");
    }
  };
  const array = (depth) => {
    at++;
    const found = [];
    space();
    if (text[at] === "]") {
      at++;
      return found;
    }
    for (;;) {
      found.push(value(depth));
      space();
      if (text[at] === ",") at++;
      else if (text[at] === "]") {
        at++;
        return found;
      } else fail("expected ',' or ']'");
    }
  };
  const string = () => {
    at++;
    let out = "";
    let start = at;
    for (;;) {
      if (at >= text.length) fail("unterminated string");
      const c = text.charCodeAt(at);
      if (c === 0x22) {
        out += text.slice(start, at++);
        return out;
      }
      if (c < 0x20) fail("control character in a string");
      if (c !== 0x5c) {
        at++;
        continue;
      }
      out += text.slice(start, at);
      const e = text[at + 1];
      const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e];
      if (simple !== undefined) at += 2, (out += simple);
      else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(at + 2, at + 6))) {
        out += String.fromCharCode(parseInt(text.slice(at + 2, at + 6), 16));
        at += 6;
      } else fail("bad escape");
      start = at;
    }
  };
  const number = () => {
    const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(at, at + 400));
    if (!match) fail("bad number");
    at += match[0].length;
    const n = Number(match[0]);
    return match[2] || match[3] || !Number.isSafeInteger(n) ? new Float(n) : n;
  };
  try {
    const found = value(0);
    space();
    if (at < text.length) fail("text after the value");
    return { value: found };
  } catch (e) {
    if (e instanceof Unreadable) return { rejected: e.reason };
    if (e instanceof RangeError) return { rejected: reason("too_deep", "JSON nested too deep") };
    throw e;
  }
}

// The plain JSON value of what readJson returned (Float back to a number).
export const plain = (value) => JSON.parse(JSON.stringify(value));

// -- text checks ---------------------------------------------------------------

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export function decodeUtf8(bytes) {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

// File names are bytes. Those that are not UTF-8 travel as Python's surrogateescape
// spells them: each byte that is no part of a UTF-8 character as U+DC80..U+DCFF.
export function decodeEscaped(bytes) {
  let out = "";
  for (let at = 0; at < bytes.length; ) {
    const lead = bytes[at];
    const size = lead < 0x80 ? 1 : lead >= 0xc2 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3 : lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
    const whole = size > 0 && decodeUtf8(bytes.subarray(at, at + size));
    if (whole && whole.length && !whole.includes("\ufffd")) {
      out += whole;
      at += size;
    } else {
      out += String.fromCharCode(0xdc00 + lead);
      at += 1;
    }
  }
  return out;
}

export function encodeEscaped(text) {
  const parts = [];
  let run = "";
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (code >= 0xdc80 && code <= 0xdcff) {
      parts.push(Buffer.from(run, "utf8"), Buffer.from([code - 0xdc00]));
      run = "";
    } else run += ch;
  }
  parts.push(Buffer.from(run, "utf8"));
  return Buffer.concat(parts);
}

export const isWellFormed = (text) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
export const utf8Length = (text) => Buffer.byteLength(text, "utf8");
const isInteger = (v) => typeof v === "number" && Number.isInteger(v);
const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Float);
const isText = (v) => typeof v === "string" && isWellFormed(v);

// -- message v1 ------------------------------------------------------------------

export function idFor(sentAt, randomHex) {
  return `${String(sentAt).padStart(13, "0")}-${randomHex}`;
}

// The message in the wire's key order; absent optional fields are left out.
export function buildMessage({ id, sentAt, from, replyTo, body }) {
  const sender = { kind: from.kind, name: from.name };
  if (from.kind === "session") sender.address = from.address;
  if (from.cwd !== undefined) sender.cwd = from.cwd;
  const message = { v: 1, id, from: sender };
  if (replyTo !== undefined) message.replyTo = replyTo;
  message.sentAt = sentAt;
  message.body = body;
  return message;
}

// Compact, non-ASCII unescaped: what pi-post 0.7 (JSON.stringify) writes.
export const encodeMessage = (message) => Buffer.from(JSON.stringify(buildMessage(message)), "utf8");

const badField = (field, why) => ({ rejected: reason("bad_field", `${field} ${why}`, { field }) });

// Bytes (or a name) → {message} or {rejected: reason}; never throws.
export function parseLetter(bytes, fileName) {
  if (bytes.length > LETTER_LIMIT) {
    return { rejected: reason("oversize", `larger than ${LETTER_LIMIT} bytes, the most a letter can be`, { limit: LETTER_LIMIT }) };
  }
  const text = decodeUtf8(bytes);
  if (text === null) return { rejected: reason("not_utf8", "not UTF-8 text") };
  const read = readJson(text);
  if (read.rejected) return read;
  const m = read.value;
  if (!isObject(m)) return { rejected: reason("not_object", "not a JSON object") };
  if (m.v !== 1) return badField("v", "must be the integer 1");
  for (const key of Object.keys(m)) {
    if (!["v", "id", "from", "replyTo", "sentAt", "body"].includes(key)) return badField(key, "is not a field of message v1");
  }
  if (typeof m.id !== "string" || !ID.test(m.id)) return badField("id", "must be 13 digits, a dash and 8 hex digits");
  if (!isObject(m.from)) return badField("from", "must be an object");
  for (const key of Object.keys(m.from)) {
    if (!["kind", "name", "address", "cwd"].includes(key)) return badField(`from.${key}`, "is not a field of a sender");
  }
  if (m.from.kind !== "session" && m.from.kind !== "process") return badField("from.kind", "must be session or process");
  if (!isText(m.from.name) || m.from.name === "") return badField("from.name", "must be non-empty text");
  if (m.from.kind === "session" ? !isAddress(m.from.address) : Object.hasOwn(m.from, "address")) {
    return badField("from.address", m.from.kind === "session" ? "must be an address" : "is not allowed for a process");
  }
  if (Object.hasOwn(m.from, "cwd") && !isText(m.from.cwd)) return badField("from.cwd", "must be text");
  if (Object.hasOwn(m, "replyTo") && !isAddress(m.replyTo)) return badField("replyTo", "must be an address");
  if (!isInteger(m.sentAt) || m.sentAt < 0 || m.sentAt >= 1e13) return badField("sentAt", "must be a whole number of ms");
  if (m.id.slice(0, 13) !== String(m.sentAt).padStart(13, "0")) return badField("id", "does not begin with sentAt");
  if (!isText(m.body)) return badField("body", "must be text");
  if (utf8Length(m.body) > BODY_CAP) return badField("body", `is over ${BODY_CAP} bytes`);
  if (fileName !== undefined && fileName !== `${m.id}.json`) {
    return { rejected: reason("id_mismatch", `the id ${m.id} is not the file name ${fileName}`) };
  }
  return { message: buildMessage(m) };
}

// -- registry record v1 ----------------------------------------------------------

// A record file → the record (as written, unknown fields kept) or null; with its
// file name, that name must be its address.
export function parseRecord(bytes, fileName) {
  if (bytes.length > RECORD_LIMIT) return null;
  const text = decodeUtf8(bytes);
  if (text === null) return null;
  const read = readJson(text);
  if (read.rejected || !isObject(read.value)) return null;
  const r = read.value;
  const fine =
    r.v === 1 &&
    isText(r.sessionId) && r.sessionId !== "" &&
    r.address === addressOf(r.sessionId) &&
    (fileName === undefined || fileName === `${r.address}.json`) &&
    isText(r.name) && r.name !== "" &&
    isText(r.cwd) && r.cwd !== "" &&
    (r.pid == null || (isInteger(r.pid) && r.pid > 0)) &&
    (r.pidStart == null || typeof r.pidStart === "string") &&
    isInteger(r.startedAt) &&
    isInteger(r.lastSeen);
  if (!fine) return null;
  const record = plain(r);
  if (record.pid === null) delete record.pid; // null counts as absent
  if (record.pid === undefined || record.pidStart === null) delete record.pidStart;
  return record;
}

export function encodeRecord(r) {
  const record = { v: 1, address: r.address, sessionId: r.sessionId, name: r.name, cwd: r.cwd };
  if (r.pid !== undefined) record.pid = r.pid;
  if (r.pidStart !== undefined) record.pidStart = r.pidStart;
  record.startedAt = r.startedAt;
  record.lastSeen = r.lastSeen;
  return Buffer.from(JSON.stringify(record), "utf8");
}
