// A Node.js backend (18 or later) asking OfferGate for a customer's best offer over HTTP, with the built-in fetch.
//
//   OFFERGATE_URL=https://offers.example.com OFFERGATE_API_KEY=og_... node node_backend.mjs CUSTOMER_ID PRODUCT_ID
const URL_RPC = (process.env.OFFERGATE_URL ?? "http://127.0.0.1:8080") + "/v1/rpc";
const API_KEY = process.env.OFFERGATE_API_KEY; // the tenant's key: from a secret store, never from source code
let nextId = 1;

export class OfferGateError extends Error {
  constructor(error) {
    super(`${error.code} ${error.message}`);
    this.code = error.code;
    this.data = error.data ?? {};
  }
}

// One JSON-RPC call: its result, or an OfferGateError with the JSON-RPC error (a 401 carries one too).
export async function call(method, params = {}) {
  const response = await fetch(URL_RPC, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
    signal: AbortSignal.timeout(5000),
  });
  if (!(response.headers.get("content-type") ?? "").startsWith("application/json")) {
    throw new Error(`HTTP ${response.status}`);
  }
  const answer = await response.json();
  if (answer.error) throw new OfferGateError(answer.error);
  return answer.result;
}

const [customerId, productId] = process.argv.slice(2);
const best = await call("offers.best", { customerId, productId });
if (best.offer === null) {
  console.log(JSON.stringify({ offer: null }));
} else {
  console.log(JSON.stringify({ offer: best.offer.offerId, displayText: best.offer.displayText }));
}
