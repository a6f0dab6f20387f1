// JSONRPC: OfferGate's JSON-RPC 2.0 layer. Of our modules it imports only the leaf utilities and the CEpoll header.
//
// Map of the module
// - JSON:      JSONValue / JSONNumber / JSONObject (JSONValue.swift), JSONParsing (strict RFC 8259 parser),
//              JSONSerializer, JSONValueDecoder / JSONValueEncoder (Codable over JSONValue), RFC3339.
// - Protocol:  RPCID, RPCRequest, RPCResponse, RPCInbound (classifies one frame), RPCError (wire errors).
// - Framing:   LineFramer (newline-delimited, frame limit, discard-without-buffering).
// - Server:    RPCHandler (+ Session), RPCContext, ConnectionInfo, RPCServerConfiguration, RPCLogEvent,
//              RPCServer (epoll loop for Unix/TCP; serveStdio on two dedicated threads), ConnectionDispatcher
//              (a connection's requests in flight), LiveCount (what shutdown waits on).
// - Transport: EventLoop (epoll via CEpoll), Channel + ChannelStateMachine (one connection's lifecycle).
// - Client:    RPCClient (pipelining, notifications, raw lines for conformance tests).
// - Local errors: JSONRPCError (one error type, with a code, context, offset/errno; no payload bytes).
//
// Decisions
// - Duplicate object keys are a parse error (-32700): "last wins" would let two layers read different values.
// - Escaped lone surrogates ("\uD800") are a parse error; so are invalid UTF-8 (overlongs, encoded surrogates,
//   > U+10FFFF), raw control characters in strings, leading zeros, NaN/Infinity and trailing garbage.
// - Nesting is limited to 64 by default (configurable, hard cap 1,024); deeper input is a -32700 parse error.
// - Numbers: integers that fit Int64 are stored as Int64, everything else keeps its exact lexeme, so
//   12345678901234567890 or 19.99 are never rounded. `1` and `1.0` are different JSONNumbers.
// - Dates: decoded from RFC 3339 (fractional seconds optional, `Z` or ±HH:MM, no leap seconds); encoded as UTC
//   with `Z`, with milliseconds only when non-zero (`2026-11-30T12:00:00Z`, `2026-11-30T12:00:00.250Z`).
// - Invalid params: `RPCError.invalidParams(DecodingError)` gives -32602 with
//   `data = {"reason": "missing_param"|"wrong_type"|"null_value"|"invalid_value", "retryable": false,
//            "param": "params.offers[2].price", "detail": "..."}`.
// - A request with `"id": null` is a request (answered with id null); no `id` member means a notification.
// - -32600 answers carry the request's id when a valid one could be read, else null.
// - A batch counts as one request against the in-flight cap; its elements run concurrently and its responses
//   come back as one array in the batch's order (notifications omitted; all notifications: no response).
// - Frames longer than the limit get -32600 `{"reason":"frame_too_large","limitBytes":N}` with id null, as soon as
//   the limit is passed; the rest of the line is skipped without being buffered.
// - Back-pressure: when a connection has `maxInFlightPerConnection` requests running, or 4 MiB of unwritten
//   responses (until they are down to 2 MiB), the loop stops reading it. Memory per connection is bounded by frame
//   limit + 4 MiB + the answers of what is in flight.
// - A channel's lifecycle (reading, back-pressure, the peer's EOF, drain, write shutdown, idle, close) is one pure
//   state machine, `ChannelStateMachine`, whose actions `EventLoop` performs.
// - Shutdown: stop accepting, stop reading (frames buffered but not started are dropped; stdio reads no more),
//   let in-flight requests finish and be written within the grace period (woken when the last connection closes,
//   not polled), then close everything, cancelling what still runs, and unlink Unix socket files.
// - Each request runs on its own Task, owned by its connection's `ConnectionDispatcher`. When the connection closes
//   with requests still running (a reset, a Unix socket closed by its peer, a read or write error, the grace
//   period over) those tasks are cancelled, so a handler awaiting a query sees cancellation. EOF (stdin's end, a
//   socket half-close) is not a disconnect: what was read is still answered. On TCP a peer's close() arrives as
//   the same FIN as a half-close, so its requests run on until an answer is written and the peer resets.
// - SIGPIPE is ignored process-wide once a server or client starts (writes report EPIPE instead).
// - epoll comes from the one-header C module `CEpoll` (Swift's Glibc module does not export <sys/epoll.h>), so
//   `struct epoll_event` has the layout C gives it (`Epoll` in Sockets.swift wraps the calls).
