import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RfbInputFilter, RfbProtocolError } from '../../src/gateway/rfb-input-filter.js';

// ---- RFB client messages (RFC 6143 and the community extensions noVNC sends) -------

const b = (...bytes: number[]) => Buffer.from(bytes);
const u16 = (n: number) => [(n >> 8) & 0xff, n & 0xff];
const u32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const s32 = (n: number) => u32(n >>> 0);

const VERSION_38 = Buffer.from('RFB 003.008\n', 'latin1');
const VERSION_33 = Buffer.from('RFB 003.003\n', 'latin1');
const SECURITY_NONE = b(1);
const CLIENT_INIT_SHARED = b(1);

/** What a viewer must be able to send to watch: none of these act on the session. */
const PASS = {
  SetPixelFormat: b(0, 0, 0, 0, 32, 24, 0, 1, ...u16(255), ...u16(255), ...u16(255), 16, 8, 0, 0, 0, 0),
  SetEncodings: b(2, 0, ...u16(4), ...s32(7), ...s32(16), ...s32(0), ...s32(-223)),
  SetEncodingsNone: b(2, 0, ...u16(0)),
  FramebufferUpdateRequest: b(3, 1, ...u16(0), ...u16(0), ...u16(1024), ...u16(768)),
  EnableContinuousUpdates: b(150, 1, ...u16(0), ...u16(0), ...u16(1024), ...u16(768)),
  ClientFence: b(248, 0, 0, 0, ...u32(0x80000001), 4, 0xde, 0xad, 0xbe, 0xef),
  ClientFenceEmpty: b(248, 0, 0, 0, ...u32(0), 0),
};

const cut = Buffer.from('secret text', 'latin1');
/** Everything that would act on the session: keys, pointer, clipboard, desktop size, power. */
const INPUT = {
  KeyEvent: b(4, 1, 0, 0, ...u32(0x61)),
  PointerEvent: b(5, 1, ...u16(100), ...u16(200)),
  ClientCutText: Buffer.concat([b(6, 0, 0, 0, ...u32(cut.length)), cut]),
  ClientCutTextEmpty: b(6, 0, 0, 0, ...u32(0)),
  // Extended clipboard: a negative length, |length| bytes follow (here: caps + 4 byte payload).
  ClientCutTextExtended: b(6, 0, 0, 0, ...s32(-8), ...u32(0x01000001), 1, 2, 3, 4),
  xvp: b(250, 0, 1, 2),
  SetDesktopSize: b(251, 0, ...u16(800), ...u16(600), 1, 0, ...u32(0), ...u16(0), ...u16(0), ...u16(800), ...u16(600), ...u32(0)),
  SetDesktopSizeTwoScreens: b(251, 0, ...u16(1600), ...u16(600), 2, 0, ...new Array(32).fill(7)),
  QemuExtendedKey: b(255, 0, ...u16(1), ...u32(0x61), ...u32(30)),
};

/** A filter past the handshake (RFB 3.8, security None, shared ClientInit). */
function ready(): RfbInputFilter {
  const f = new RfbInputFilter();
  assert.deepEqual(f.push(Buffer.concat([VERSION_38, SECURITY_NONE, CLIENT_INIT_SHARED])), Buffer.concat([VERSION_38, SECURITY_NONE, CLIENT_INIT_SHARED]));
  return f;
}

/** Feeds `chunks` one by one; returns everything forwarded, concatenated. */
function feed(f: RfbInputFilter, chunks: Buffer[]): Buffer {
  return Buffer.concat(chunks.map((c) => f.push(c)));
}

// ---- handshake -------------------------------------------------------------------

describe('RfbInputFilter: handshake', () => {
  test('RFB 3.8: version, security type None and ClientInit pass unchanged', () => {
    const f = new RfbInputFilter();
    assert.deepEqual(f.push(VERSION_38), VERSION_38);
    assert.deepEqual(f.push(SECURITY_NONE), SECURITY_NONE);
    assert.deepEqual(f.push(CLIENT_INIT_SHARED), CLIENT_INIT_SHARED);
    // Now in the message phase: input is dropped, watching passes.
    assert.equal(f.push(INPUT.KeyEvent).length, 0);
    assert.deepEqual(f.push(PASS.FramebufferUpdateRequest), PASS.FramebufferUpdateRequest);
    assert.equal(f.dropped, 1);
  });

  test('RFB 3.7 also sends a security type choice', () => {
    const v37 = Buffer.from('RFB 003.007\n', 'latin1');
    const f = new RfbInputFilter();
    const hs = Buffer.concat([v37, SECURITY_NONE, CLIENT_INIT_SHARED]);
    assert.deepEqual(f.push(hs), hs);
    assert.equal(f.push(INPUT.PointerEvent).length, 0);
    assert.equal(f.dropped, 1);
  });

  test('RFB 3.3: the server picks the security type, so the byte after the version is ClientInit', () => {
    const f = new RfbInputFilter();
    assert.deepEqual(f.push(VERSION_33), VERSION_33);
    // A non-shared ClientInit (0) is not a security type: no error in 3.3.
    assert.deepEqual(f.push(b(0)), b(0));
    assert.equal(f.push(INPUT.PointerEvent).length, 0);
    assert.deepEqual(f.push(PASS.SetEncodings), PASS.SetEncodings);
    assert.equal(f.dropped, 1);
  });

  test('ClientInit 0 (not shared) after security None passes too', () => {
    const f = new RfbInputFilter();
    const hs = Buffer.concat([VERSION_38, SECURITY_NONE, b(0)]);
    assert.deepEqual(f.push(hs), hs);
    assert.equal(f.push(INPUT.KeyEvent).length, 0);
  });

  test('the whole handshake arriving in one chunk together with messages is split correctly', () => {
    const f = new RfbInputFilter();
    const out = f.push(Buffer.concat([VERSION_38, SECURITY_NONE, CLIENT_INIT_SHARED, PASS.SetEncodings, INPUT.PointerEvent, PASS.FramebufferUpdateRequest]));
    assert.deepEqual(out, Buffer.concat([VERSION_38, SECURITY_NONE, CLIENT_INIT_SHARED, PASS.SetEncodings, PASS.FramebufferUpdateRequest]));
    assert.equal(f.dropped, 1);
  });

  test('a malformed version string is a protocol error', () => {
    for (const v of ['RFB 3.8\n    ', 'GET / HTTP/1.', 'RFB 003.008\r', 'rfb 003.008\n']) {
      const f = new RfbInputFilter();
      assert.throws(() => f.push(Buffer.from(v.slice(0, 12), 'latin1')), RfbProtocolError, JSON.stringify(v));
    }
  });

  for (const type of [0, 2, 16, 19, 30, 255]) {
    test(`security type ${type} (not None) is a protocol error`, () => {
      const f = new RfbInputFilter();
      f.push(VERSION_38);
      assert.throws(() => f.push(b(type)), RfbProtocolError);
    });
  }

  test('VNC authentication (type 2) is refused before its 16-byte response could be misread as messages', () => {
    const f = new RfbInputFilter();
    f.push(VERSION_38);
    // Type 2 plus a DES response that starts with bytes that look like a KeyEvent.
    assert.throws(() => f.push(Buffer.concat([b(2), INPUT.KeyEvent, INPUT.KeyEvent])), RfbProtocolError);
  });
});

// ---- message classification ------------------------------------------------------

describe('RfbInputFilter: what a readonly viewer may send', () => {
  for (const [name, msg] of Object.entries(PASS)) {
    test(`${name} passes byte-identical and is not counted`, () => {
      const f = ready();
      const out = f.push(msg);
      assert.deepEqual(out, msg);
      assert.equal(f.dropped, 0);
    });
  }

  for (const [name, msg] of Object.entries(INPUT)) {
    test(`${name} is dropped and counted`, () => {
      const f = ready();
      assert.equal(f.push(msg).length, 0);
      assert.equal(f.dropped, 1);
      // The stream stays in step: the next message is recognised and passes whole.
      assert.deepEqual(f.push(PASS.FramebufferUpdateRequest), PASS.FramebufferUpdateRequest);
      assert.equal(f.dropped, 1);
    });
  }

  test('a mixed stream in one chunk: input removed, the rest forwarded in order, byte-identical', () => {
    const f = ready();
    const seq = [
      PASS.SetPixelFormat,
      INPUT.KeyEvent,
      PASS.SetEncodings,
      INPUT.PointerEvent,
      INPUT.ClientCutText,
      PASS.FramebufferUpdateRequest,
      INPUT.ClientCutTextExtended,
      PASS.EnableContinuousUpdates,
      INPUT.xvp,
      PASS.ClientFence,
      INPUT.SetDesktopSize,
      INPUT.QemuExtendedKey,
      PASS.FramebufferUpdateRequest,
    ];
    const out = f.push(Buffer.concat(seq));
    assert.deepEqual(out, Buffer.concat([PASS.SetPixelFormat, PASS.SetEncodings, PASS.FramebufferUpdateRequest, PASS.EnableContinuousUpdates, PASS.ClientFence, PASS.FramebufferUpdateRequest]));
    assert.equal(f.dropped, 7);
  });

  test('the text of a dropped ClientCutText never reaches the output, whatever its content', () => {
    // Cut text that itself looks like RFB messages must be skipped as data, not parsed.
    const payload = Buffer.concat([PASS.FramebufferUpdateRequest, INPUT.KeyEvent, Buffer.from('more', 'latin1')]);
    const msg = Buffer.concat([b(6, 0, 0, 0, ...u32(payload.length)), payload]);
    const f = ready();
    assert.equal(f.push(msg).length, 0);
    assert.equal(f.dropped, 1);
    assert.deepEqual(f.push(PASS.SetEncodingsNone), PASS.SetEncodingsNone);
  });

  test('an extended ClientCutText (negative length) is skipped by its absolute length', () => {
    const body = Buffer.alloc(300, 3); // bytes that are not a valid message type on their own
    const msg = Buffer.concat([b(6, 0, 0, 0, ...s32(-body.length)), body]);
    const f = ready();
    assert.equal(feed(f, [msg, PASS.FramebufferUpdateRequest]).length, PASS.FramebufferUpdateRequest.length);
    assert.equal(f.dropped, 1);
  });

  test('a huge ClientCutText is skipped as it streams in, never held whole', () => {
    for (const len of [64 * 1024 * 1024, -(64 * 1024 * 1024)]) {
      const f = ready();
      assert.equal(f.push(b(6, 0, 0, 0, ...s32(len))).length, 0);
      const mb = Buffer.alloc(1024 * 1024, 0x41);
      for (let i = 0; i < 64; i++) {
        assert.equal(f.push(mb).length, 0);
        assert.ok(f.buffered < 16, `holds ${f.buffered} bytes after ${i + 1} MiB`);
      }
      assert.equal(f.dropped, 1);
      // Exactly at the end of the text the stream is in step again, also when the next message shares the chunk.
      assert.deepEqual(f.push(Buffer.concat([PASS.FramebufferUpdateRequest, INPUT.KeyEvent, PASS.SetEncodingsNone])), Buffer.concat([PASS.FramebufferUpdateRequest, PASS.SetEncodingsNone]));
      assert.equal(f.dropped, 2);
    }
  });

  test('the end of a skipped ClientCutText and the next messages in one chunk', () => {
    const f = ready();
    f.push(b(6, 0, 0, 0, ...u32(10), 1, 2, 3));
    assert.equal(f.buffered, 0);
    const out = f.push(Buffer.concat([b(4, 5, 6, 7, 8, 9, 10), PASS.FramebufferUpdateRequest]));
    assert.deepEqual(out, PASS.FramebufferUpdateRequest);
    assert.equal(f.dropped, 1);
  });

  test('SetEncodings with many encodings and ClientFence with a long payload are measured, not guessed', () => {
    const encs = Array.from({ length: 40 }, (_, i) => s32(-300 + i)).flat();
    const setEnc = b(2, 0, ...u16(40), ...encs);
    const fence = b(248, 0, 0, 0, ...u32(1), 64, ...new Array(64).fill(5));
    const f = ready();
    const out = f.push(Buffer.concat([setEnc, fence, INPUT.KeyEvent, PASS.FramebufferUpdateRequest]));
    assert.deepEqual(out, Buffer.concat([setEnc, fence, PASS.FramebufferUpdateRequest]));
    assert.equal(f.dropped, 1);
  });

  test('many input messages are all counted', () => {
    const f = ready();
    const n = 500;
    const out = f.push(Buffer.concat(Array.from({ length: n }, (_, i) => (i % 2 ? INPUT.PointerEvent : INPUT.KeyEvent))));
    assert.equal(out.length, 0);
    assert.equal(f.dropped, n);
  });
});

// ---- byte-stream reassembly ------------------------------------------------------

describe('RfbInputFilter: messages split across websocket frames', () => {
  const handshake = Buffer.concat([VERSION_38, SECURITY_NONE, CLIENT_INIT_SHARED]);
  const messages = [
    PASS.SetPixelFormat,
    PASS.SetEncodings,
    INPUT.KeyEvent,
    PASS.FramebufferUpdateRequest,
    INPUT.PointerEvent,
    INPUT.ClientCutText,
    PASS.EnableContinuousUpdates,
    INPUT.ClientCutTextExtended,
    PASS.ClientFence,
    INPUT.xvp,
    INPUT.SetDesktopSizeTwoScreens,
    INPUT.QemuExtendedKey,
    PASS.ClientFenceEmpty,
    PASS.SetEncodingsNone,
    INPUT.ClientCutTextEmpty,
    PASS.FramebufferUpdateRequest,
  ];
  const stream = Buffer.concat([handshake, ...messages]);
  const expected = Buffer.concat([handshake, ...messages.filter((m) => Object.values(PASS).includes(m))]);
  const inputs = messages.filter((m) => Object.values(INPUT).includes(m)).length;

  test('the reference stream: one chunk', () => {
    const f = new RfbInputFilter();
    assert.deepEqual(f.push(stream), expected);
    assert.equal(f.dropped, inputs);
  });

  test('split in two at every byte boundary gives the same output', () => {
    for (let i = 1; i < stream.length; i++) {
      const f = new RfbInputFilter();
      const out = feed(f, [stream.subarray(0, i), stream.subarray(i)]);
      assert.deepEqual(out, expected, `split at byte ${i}`);
      assert.equal(f.dropped, inputs, `split at byte ${i}`);
    }
  });

  test('split in three at every pair of boundaries (messages spanning three frames)', () => {
    for (let i = 1; i < stream.length - 1; i += 1) {
      for (let j = i + 1; j < stream.length; j += 3) {
        const f = new RfbInputFilter();
        const out = feed(f, [stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)]);
        assert.deepEqual(out, expected, `split at bytes ${i} and ${j}`);
        assert.equal(f.dropped, inputs);
      }
    }
  });

  test('one byte at a time', () => {
    const f = new RfbInputFilter();
    const chunks = [...stream].map((x) => b(x));
    const out = feed(f, chunks);
    assert.deepEqual(out, expected);
    assert.equal(f.dropped, inputs);
  });

  test('a partial message is held back, not forwarded half', () => {
    const f = ready();
    const m = PASS.FramebufferUpdateRequest;
    for (let i = 0; i < m.length - 1; i++) assert.equal(f.push(m.subarray(i, i + 1)).length, 0, `byte ${i}`);
    assert.deepEqual(f.push(m.subarray(m.length - 1)), m);
  });
});

// ---- protocol errors -------------------------------------------------------------

describe('RfbInputFilter: unknown messages are errors, not guesses', () => {
  for (const type of [1, 7, 8, 9, 10, 11, 127, 128, 149, 151, 200, 249, 252, 253, 254]) {
    test(`client message type ${type} throws RfbProtocolError`, () => {
      const f = ready();
      assert.throws(() => f.push(b(type, 0, 0, 0, 0, 0, 0, 0)), RfbProtocolError);
    });
  }

  test('a QEMU sub-message other than the extended key event throws', () => {
    const f = ready();
    assert.throws(() => f.push(b(255, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), RfbProtocolError);
  });

  test('an unknown type after valid messages in the same chunk still throws', () => {
    const f = ready();
    assert.throws(() => f.push(Buffer.concat([PASS.FramebufferUpdateRequest, INPUT.KeyEvent, b(42)])), RfbProtocolError);
  });

  test('an unknown type hidden in the second half of a split is found when it arrives', () => {
    const f = ready();
    assert.equal(f.push(b(3, 1, 0)).length, 0);
    assert.throws(() => f.push(Buffer.concat([PASS.FramebufferUpdateRequest.subarray(3), b(99)])), RfbProtocolError);
  });

  test('RfbProtocolError is an Error with a message', () => {
    const f = ready();
    try {
      f.push(b(77));
      assert.fail('no error');
    } catch (err) {
      assert.ok(err instanceof RfbProtocolError);
      assert.ok(err instanceof Error);
      assert.match(err.message, /77/);
    }
  });
});
