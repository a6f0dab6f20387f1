import Foundation

/// Exit statuses shared by every OfferGate executable (sysexits-style, as swift-argument-parser uses them).
public enum ExitStatus: Int32, Sendable {
    case success = 0
    /// A runtime failure (database down, server error, …).
    case failure = 1
    /// The invariant check of `offer-load` found a breach.
    case invariantBreach = 2
    /// The command line was wrong.
    case usage = 64
}

/// One option of a command: `--name VALUE`, `--name=VALUE`, or a flag `--name`.
public struct OptionSpec: Sendable {
    public let name: String
    public let valueName: String?
    public let help: String
    public let environment: String?
    public let repeatable: Bool
    public let defaultValue: String?

    /// An option that takes a value (`valueName` is shown in help, e.g. `URL`).
    public static func option(
        _ name: String, _ valueName: String, _ help: String, environment: String? = nil, default value: String? = nil,
        repeatable: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            name: name, valueName: valueName, help: help, environment: environment, repeatable: repeatable,
            defaultValue: value)
    }

    /// A boolean flag.
    public static func flag(_ name: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: nil, help: help, environment: nil, repeatable: false, defaultValue: nil)
    }
}

/// A positional argument.
public struct ArgumentSpec: Sendable {
    public let name: String
    public let help: String
    public let optional: Bool

    public init(_ name: String, _ help: String, optional: Bool = false) {
        self.name = name
        self.help = help
        self.optional = optional
    }
}

/// A command: a name, a one-line abstract, options, positional arguments and subcommands (nouns then verbs).
public struct CommandSpec: Sendable {
    public let name: String
    public let abstract: String
    public let discussion: String?
    public let options: [OptionSpec]
    public let arguments: [ArgumentSpec]
    public let subcommands: [CommandSpec]

    public init(
        _ name: String, abstract: String, discussion: String? = nil, options: [OptionSpec] = [],
        arguments: [ArgumentSpec] = [], subcommands: [CommandSpec] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.arguments = arguments
        self.subcommands = subcommands
    }
}

/// What the command line said, after parsing against a `CommandSpec`.
public struct ParsedCommand: Sendable {
    /// The subcommand names below the root, e.g. `["campaign", "create"]`.
    public let path: [String]
    public let spec: CommandSpec
    private let values: [String: [String]]
    private let flags: Set<String>
    public let arguments: [String]
    private let environment: [String: String]

    init(
        path: [String], spec: CommandSpec, values: [String: [String]], flags: Set<String>, arguments: [String],
        environment: [String: String]
    ) {
        self.path = path
        self.spec = spec
        self.values = values
        self.flags = flags
        self.arguments = arguments
        self.environment = environment
    }

    /// The last value given for `--name`, else its environment variable, else its default.
    public func value(_ name: String) -> String? {
        if let given = values[name]?.last { return given }
        guard let option = spec.options.first(where: { $0.name == name }) else { return nil }
        if let env = option.environment, let value = environment[env], !value.isEmpty { return value }
        return option.defaultValue
    }

    /// Every value given for a repeatable option, in order (environment/default when none given).
    public func values(_ name: String) -> [String] {
        if let given = values[name], !given.isEmpty { return given }
        return value(name).map { [$0] } ?? []
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// A value that must be present.
    public func required(_ name: String) throws(UsageError) -> String {
        guard let value = value(name) else { throw UsageError("missing --\(name)", command: path) }
        return value
    }

    /// A whole number option, checked against a range.
    public func integer(_ name: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(UsageError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError(
                "--\(name) takes a whole number in \(range.lowerBound)...\(range.upperBound)", command: path)
        }
        return number
    }

    /// A number of seconds (decimals allowed), checked to be ≥ 0.
    public func seconds(_ name: String) throws(UsageError) -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number >= 0, number.isFinite else {
            throw UsageError("--\(name) takes a number of seconds", command: path)
        }
        return number
    }
}

/// A command line that does not fit the command's spec, or a request for help.
/// A runtime failure of a command: its message goes to stderr and the exit status is 1.
public struct Failure: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ message: String) { description = message }
}

public struct UsageError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public let command: [String]
    public init(_ message: String, command: [String]) {
        self.message = message
        self.command = command
    }
    public var description: String { message }
}

/// The outcome of parsing: a command to run, or help to print.
public enum ParseOutcome: Sendable {
    case run(ParsedCommand)
    case help(String)
}

extension CommandSpec {
    /// Parses `arguments` (without the program name). `--help`/`-h` anywhere yields the help of the deepest
    /// subcommand named so far; a command with subcommands and none named yields its own help.
    public func parse(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(UsageError) -> ParseOutcome
    {
        var spec = self
        var path: [String] = []
        var index = 0
        // Walk down the subcommands.
        while !spec.subcommands.isEmpty {
            guard index < arguments.count else { return .help(spec.helpText(path: path, root: name)) }
            let word = arguments[index]
            if word == "--help" || word == "-h" || word == "help" {
                return .help(spec.helpText(path: path, root: name))
            }
            guard let sub = spec.subcommands.first(where: { $0.name == word }) else {
                let known = spec.subcommands.map(\.name).joined(separator: ", ")
                throw UsageError("unknown command '\(word)' (expected one of: \(known))", command: path)
            }
            spec = sub
            path.append(word)
            index += 1
        }
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var positionals: [String] = []
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--help" || word == "-h" { return .help(spec.helpText(path: path, root: name)) }
            if word == "--" {
                positionals.append(contentsOf: arguments[index...])
                break
            }
            guard word.hasPrefix("--") else {
                positionals.append(word)
                continue
            }
            var key = String(word.dropFirst(2))
            var inline: String?
            if let eq = key.firstIndex(of: "=") {
                inline = String(key[key.index(after: eq)...])
                key = String(key[..<eq])
            }
            guard let option = spec.options.first(where: { $0.name == key }) else {
                throw UsageError("unknown option '--\(key)'", command: path)
            }
            if option.valueName == nil {
                guard inline == nil else { throw UsageError("--\(key) takes no value", command: path) }
                flags.insert(key)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw UsageError("--\(key) needs a value", command: path) }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable, values[key] != nil {
                throw UsageError("--\(key) given more than once", command: path)
            }
            values[key, default: []].append(value)
        }
        let required = spec.arguments.filter { !$0.optional }.count
        guard positionals.count >= required else {
            let missing = spec.arguments[positionals.count].name
            throw UsageError("missing argument <\(missing)>", command: path)
        }
        guard positionals.count <= spec.arguments.count else {
            throw UsageError("unexpected argument '\(positionals[spec.arguments.count])'", command: path)
        }
        return .run(
            ParsedCommand(
                path: path, spec: spec, values: values, flags: flags, arguments: positionals,
                environment: environment))
    }

    /// The generated `--help` text.
    public func helpText(path: [String], root: String) -> String {
        var out = "OVERVIEW: \(abstract)\n"
        if let discussion { out += "\n\(discussion)\n" }
        let invocation = ([root] + path).joined(separator: " ")
        var usage = invocation
        if !subcommands.isEmpty { usage += " <command>" }
        if !options.isEmpty { usage += " [options]" }
        for argument in arguments { usage += argument.optional ? " [<\(argument.name)>]" : " <\(argument.name)>" }
        out += "\nUSAGE: \(usage)\n"
        if !arguments.isEmpty {
            out += "\nARGUMENTS:\n"
            out += Self.columns(arguments.map { ("<\($0.name)>", $0.help) })
        }
        if !subcommands.isEmpty {
            out += "\nCOMMANDS:\n"
            out += Self.columns(subcommands.map { ($0.name, $0.abstract) })
            out += "\n  See '\(invocation) <command> --help' for details.\n"
        }
        var rows = options.map { option -> (String, String) in
            var left = "--\(option.name)"
            if let valueName = option.valueName { left += " <\(valueName)>" }
            var right = option.help
            if let env = option.environment { right += " (env: \(env))" }
            if let value = option.defaultValue { right += " (default: \(value))" }
            if option.repeatable { right += " (repeatable)" }
            return (left, right)
        }
        rows.append(("-h, --help", "Show help information."))
        out += "\nOPTIONS:\n" + Self.columns(rows)
        return out
    }

    private static func columns(_ rows: [(String, String)]) -> String {
        let width = min(34, (rows.map(\.0.count).max() ?? 0) + 2)
        return rows.map { left, right in
            let pad =
                left.count < width
                ? String(repeating: " ", count: width - left.count) : "\n  " + String(repeating: " ", count: width)
            return "  \(left)\(pad)\(right)\n"
        }.joined()
    }
}
