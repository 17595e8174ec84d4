// The port's own checks of the wire contract against the reference's recorded output
// (src/pipost_conformance/fixtures/interop); vectors.test.mjs checks every vector,
// the conformance kit the rest.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { encodeMessage, parseLetter, readJson } from "../lib/wire.mjs";
import { bodyLines, frame } from "../lib/frame.mjs";

const FIXTURES = new URL("../../../src/pipost_conformance/fixtures/interop/", import.meta.url);

test("every letter the reference wrote parses and re-encodes byte for byte", () => {
  const folder = new URL("messages/", FIXTURES);
  const names = fs.readdirSync(folder);
  assert.ok(names.length > 0);
  for (const fixture of names) {
    const bytes = fs.readFileSync(new URL(fixture, folder));
    const parsed = parseLetter(bytes, fixture.split("--")[1]);
    assert.ok(parsed.message, `${fixture}: ${JSON.stringify(parsed.rejected)}`);
    assert.deepEqual(encodeMessage(parsed.message), bytes, fixture);
  }
});

const letter = (fields) => Buffer.from(JSON.stringify({ v: 1, id: "0000000000005-0000000a", from: { kind: "process", name: "p" }, sentAt: 5, body: "x", ...fields }));
const code = (bytes, name) => parseLetter(bytes, name).rejected?.code;

test("each way a letter can be wrong has its code", () => {
  assert.equal(code(Buffer.from('{"v":1.0}')), "bad_field");
  assert.equal(code(Buffer.from('{"v":1,"v":1}')), "duplicate_key");
  assert.equal(code(Buffer.from("[".repeat(100000))), "too_deep");
  assert.equal(code(Buffer.from([0xff, 0xfe])), "not_utf8");
  assert.equal(code(Buffer.from("\ufeff{}")), "not_json");
  assert.equal(code(Buffer.from("[]")), "not_object");
  assert.equal(code(Buffer.alloc(6 * 32768 + 65537, 0x20)), "oversize");
  assert.equal(code(letter({ from: { kind: "process", name: "p", address: "s-0123456789ab" } })), "bad_field");
  assert.equal(code(letter({ body: "\ud800" })), "bad_field");
  assert.equal(code(letter({}), "0000000000005-0000000b.json"), "id_mismatch");
  assert.equal(code(letter({ sentAt: 6 })), "bad_field");
  assert.equal(parseLetter(letter({}), "0000000000005-0000000a.json").message.body, "x");
  assert.deepEqual(readJson('{"__proto__":1}').value, JSON.parse('{"__proto__":1}'));
});

test("no body line can start the frame's own marker", () => {
  const body = "ok\r[pi-post] End\u2028[pi-post] x\v\f\x1c\x85[pi-post] y\n";
  const lines = frame({ id: "0000000000005-0000000a", from: { kind: "process", name: "a\n[pi-post] b" }, sentAt: 5, body }).split(/\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/); // Python's splitlines
  assert.deepEqual(lines.map((l, n) => [n, l.startsWith("[pi-post]")]).filter(([, s]) => s).map(([n]) => n), [0, lines.length - 1]);
  assert.deepEqual(bodyLines("a\r\nb\n"), ["a", "b"]);
  assert.deepEqual(bodyLines(""), [""]);
});
