// offerctl: the operators' CLI. A thin JSON-RPC client of the gateway; it parses its command line, connects (or
// starts `offergate serve --stdio`), authenticates with the admin key, calls one method and prints the result.
import CLIKit
import Foundation
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// `db migrate`: replaces this process with `offergate migrate` (database options through the environment), so its
/// output and exit status are the command's own.
func runMigrate(_ command: ParsedCommand) throws -> Int32 {
    guard let path = ChildProcess.locate("offergate") else {
        throw Failure("cannot find the offergate executable next to offerctl or on PATH")
    }
    if let url = command.value("database-url") { setenv("DATABASE_URL", url, 1) }
    if let dir = command.value("data-dir") { setenv("OFFERGATE_DATA_DIR", dir, 1) }
    let words: [String] = [path, "migrate"]
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    execv(path, argv)
    throw Failure("cannot run \(path): \(String(cString: strerror(errno)))")
}

func run(_ command: ParsedCommand) async throws -> Int32 {
    if command.path == ["db", "migrate"] { return try runMigrate(command) }
    guard let handler = handlers[command.path] else {
        throw UsageError("say what to do", command: command.path)
    }
    try validators[command.path]?(command)
    let link = try await GatewayLink.open(command)
    do {
        try await handler(command, link)
    } catch {
        await link.close()
        throw error
    }
    await link.close()
    return ExitStatus.success.rawValue
}

// A gateway that goes away must not kill us with SIGPIPE: writes fail with EPIPE and are reported instead.
signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
do {
    switch try rootSpec.parse(arguments) {
    case .help(let text):
        Console.out(text)
        status = ExitStatus.success.rawValue
    case .run(let command):
        status = try await run(command)
    }
} catch let error as UsageError {
    Console.error("offerctl: \(error.message)")
    Console.error("See '\((["offerctl"] + error.command).joined(separator: " ")) --help'.")
    status = ExitStatus.usage.rawValue
} catch let error as RPCError {
    var line = "offerctl: \(error.message) (code \(error.code)"
    if let reason = error.reason { line += ", reason \(reason)" }
    Console.error(line + ")")
    if let param = error.data?["param"]?.stringValue { Console.error("  param: \(param)") }
    status = ExitStatus.failure.rawValue
} catch let error as Failure {
    Console.error("offerctl: \(error.description)")
    status = ExitStatus.failure.rawValue
} catch {
    Console.error("offerctl: \(error)")
    status = ExitStatus.failure.rawValue
}
exit(status)
