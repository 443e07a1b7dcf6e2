import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl headers`: the HTTP headers of one request as a JSON object, for agents and MCP
/// clients that run a command to get their headers (a "headers helper").
struct Headers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the HTTP headers for a request to a resource, as one JSON object.",
        discussion: """
            For agents and MCP clients that take a command printing the headers of their \
            requests. A Bearer token gives {"Authorization": "Bearer …"}; a DPoP-bound one \
            (a provider with dpop on) {"Authorization": "DPoP …", "DPoP": "<proof>"}, the \
            proof for --method (default POST) and --url (default the resource), good for \
            one request: agents that run the command per request get a fresh one each time.

            A resource no configured provider lists works as with `authctl token`: its \
            metadata names its provider (docs/agents.md).

              authctl headers --resource https://mcp.example.com/mcp
            """
    )

    @OptionGroup var options: TokenOptions

    @Option(help: ArgumentHelp("The URL of the request, for a DPoP proof (default: the resource).", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("The request's HTTP method, for a DPoP proof (default POST: MCP's streamable HTTP).", valueName: "method"))
    var method: String?

    func run() throws {
        let params = options.params()
        let text = try DaemonCall.session { broker throws(ClientError) -> String in
            let token = try SignInOnDemand.retrying(broker, params, wait: options.waitForSignIn) { () throws(ClientError) in
                try broker.token(params)
            }
            try DaemonCall.checkPrintable(token)
            guard token.tokenType.lowercased() == "dpop" else {
                return try Output.json(["Authorization": "\(token.tokenType) \(token.accessToken)"], oneLine: true)
            }
            guard let htu = url ?? params.resource else {
                throw .rpc(RPCError(.invalidParams, "the token is DPoP-bound: give --url, the request's URL, for its proof"))
            }
            let proof = try broker.dpopProof(DPoPProofParams(token: params, htm: (method ?? "POST").uppercased(), htu: htu))
            try DaemonCall.checkPrintable(proof.token)
            return try Output.json(["Authorization": "DPoP \(proof.token.accessToken)", "DPoP": proof.proof], oneLine: true)
        }
        Output.line(text)
    }
}
