import ArgumentParser

/// `--provider`, declared once for every command that works on one provider.
struct ProviderOption: ParsableArguments {
    @Option(help: "The provider's name in config.toml; may be left out when only one is configured.", completion: Completions.provider)
    var provider: String?

    /// An empty name is no provider's: without this it reached the daemon and came back as
    /// "no provider named  is configured".
    func validate() throws {
        if let provider, provider.isEmpty {
            throw ValidationError("--provider needs a name, e.g. --provider corp")
        }
    }
}

/// `--provider` and `--account`: which signed-in account a command means.
struct AccountOptions: ParsableArguments {
    @OptionGroup var which: ProviderOption

    @Option(help: "The account as `authctl accounts` shows it, or its subject; may be left out when the provider has one account.")
    var account: String?

    var provider: String? { which.provider }

    /// An empty name is no account's: without this it came back as "no account  is signed in".
    func validate() throws {
        if let account, account.isEmpty {
            throw ValidationError("--account needs a name or a subject, as `authctl accounts` shows them")
        }
    }
}
