// What the Node.js client tests (openai-client.js, aisdk-client.js) share:
// checks that count failures instead of stopping, and per-port counts of
// connections opened and requests sent through Node's fetch (undici's
// diagnostics channels), to show that clients reuse their connections.
'use strict';
const diagnostics = require('diagnostics_channel');

const connections = new Map(); // port -> connections opened
const requests = new Map();    // port -> requests sent
function bump(map, port) { map.set(String(port), (map.get(String(port)) || 0) + 1); }
diagnostics.subscribe('undici:client:connected', (m) => bump(connections, m.connectParams.port));
diagnostics.subscribe('undici:request:create', (m) => bump(requests, new URL(m.request.origin).port));

let checks = 0;
let failed = 0;
function check(ok, what) {
  checks++;
  if (!ok) {
    failed++;
    console.error('FAIL: ' + what);
  }
}

// Connections opened and requests sent to the server at url so far.
function connectionUse(url) {
  const port = new URL(url).port;
  return { connections: connections.get(port) || 0, requests: requests.get(port) || 0 };
}

// A promise that must be rejected: one check that it was, with an error
// accepts(e) takes (want says which); returns the error.
async function expectRejection(promise, accepts, want, what) {
  try {
    await promise;
    check(false, what + ': no error');
  } catch (e) {
    check(accepts(e), `${what}: ${want} (got ${e && e.constructor.name} ` +
                      `${e && (e.status ?? e.statusCode)}: ${e && e.message})`);
    return e;
  }
}

// One check that the client reused its connections to the server at url:
// at least minRequestsPerConnection requests over each, on average.
function checkConnectionReuse(url, minRequestsPerConnection) {
  const { connections: c, requests: r } = connectionUse(url);
  check(c >= 1 && r >= c * minRequestsPerConnection,
        `connection reuse on ${url}: ${r} requests over ${c} connections`);
  console.log(`${url}: ${r} requests over ${c} connections`);
}

// Prints the summary line and exits: 1 when a check failed.
function finishChecks() {
  console.log(`Node.js ${process.version}: ${checks} checks, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

// Runs the client's checks; an exception out of them is a failure.
function runChecks(main) {
  main().then(finishChecks, (e) => {
    console.error('FAIL: ' + (e && e.stack ? e.stack : e));
    process.exit(1);
  });
}

module.exports = { check, checkConnectionReuse, expectRejection, runChecks };
