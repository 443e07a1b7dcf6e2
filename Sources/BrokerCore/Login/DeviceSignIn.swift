import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import OAuth
import SecretStore

/// The device sign-in (RFC 8628): the code the user types elsewhere, and the daemon polling
/// the provider until it is approved.
///
/// Owns no state beyond the sign-ins it adds to `LoginSessions` (the sign-in service's).
final class DeviceSignIn: Sendable {
    private let logins: LoginSessions
    private let completion: SignInCompletion
    private let counters: BrokerCounters
    private let logger: Logger
    private let clock: WallClock

    init(logins: LoginSessions, completion: SignInCompletion, counters: BrokerCounters, logger: Logger, clock: WallClock) {
        self.logins = logins
        self.completion = completion
        self.counters = counters
        self.logger = logger
        self.clock = clock
    }

    func start(_ provider: Provider, resource: String?) async throws(BrokerError) -> LoginStartResult {
        let metadata = try await provider.discovered()
        guard metadata.deviceAuthorizationEndpoint != nil else {
            // Not the provider's refusal: its discovery names no such endpoint (some serve
            // one anyway), and config.toml does not name one either.
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) names no device authorization endpoint in its discovery document: set device_authorization_endpoint under [providers.\(provider.name)] in config.toml to the URL its documentation gives, or sign in with the browser (`authctl login` without --device)")
        }
        await logins.replace(provider: provider.name)
        // Deadlines count on CLOCK_BOOTTIME (`WallClock`); the wire gets the wall clock's.
        let started = clock.reading()
        let authorization: DeviceAuthorization
        do {
            authorization = try await provider.client.startDeviceAuthorization(
                metadata, scopes: provider.config.scopes, resources: resource.map { [$0] } ?? provider.config.resources)
        } catch {
            counters.providerErrors.increment()
            throw await provider.failed(error, doing: "device sign-in")
        }
        let id = SecureRandom.token(bytes: 16)
        let expiresAt = started.boot + Double(authorization.expiresIn)
        // A new sign-in gets a new DPoP key; the tokens it redeems are bound to it.
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let task = Task<AccountInfo, any Error> {
            try await self.pollDevice(authorization, metadata: metadata, provider: provider, dpop: signer, resource: resource, deadline: expiresAt)
        }
        let session = LoginSession(id: id, provider: provider.name, expiresAt: expiresAt, task: task)
        let shown = LoginStartResult(
            loginID: id, provider: provider.name, flow: .device,
            verificationURI: authorization.verificationURI,
            verificationURIComplete: authorization.verificationURIComplete,
            userCode: authorization.userCode, expiresAt: Int64(expiresAt + started.offset))
        session.shown = shown
        do {
            try logins.add(session, now: started.boot)
        } catch {
            // Refused (too many running): nobody was shown its code, so nothing may poll with it.
            task.cancel()
            throw error
        }
        logger.info("device sign-in started", metadata: ["provider": "\(provider.name)", "login_id": "\(id)"])
        return shown
    }

    /// RFC 8628 §3.4–3.5: poll at the interval, slow down when told, stop at expiry or refusal.
    private func pollDevice(_ authorization: DeviceAuthorization, metadata: ProviderMetadata, provider: Provider,
                            dpop signer: DPoPSigner?, resource: String?, deadline: Double) async throws(BrokerError) -> AccountInfo {
        let client = provider.client(signer, metadata: metadata, clock: clock)
        var interval = max(1, authorization.interval)
        let name = provider.name
        // A device sign-in is what the user can finish here (perhaps no browser is at hand).
        let again = "run `authctl login --device --provider \(name)` again"
        // Why the last poll failed, if it did: a code that runs out while the provider is
        // failing was perhaps approved, and the user should hear that it was the provider.
        var failing: String?
        var polledLastChance = false
        while true {
            // RFC 8628 §3.5: wait the interval between polls. A poll the interval would put
            // past the code's expiry is pointless (a provider may ask for more time between
            // polls than its code lives): the last poll comes a second before it expires.
            let left = deadline - clock.boottime()
            let lastChance = Double(interval) >= left - 1
            let wait = lastChance ? max(0, left - 1) : Double(interval)
            if !(lastChance && polledLastChance) {
                do {
                    try await Task.sleep(for: .seconds(wait))
                } catch {
                    throw BrokerError.signInCancelled(name)
                }
            }
            if clock.boottime() >= deadline || (lastChance && polledLastChance) {
                if let failing {
                    throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) was abandoned because the provider failed until its code expired (\(failing)): \(again)")
                }
                throw BrokerError.loginFailed(provider: name, message: "the code for \(name) expired before it was approved: \(again)")
            }
            polledLastChance = lastChance
            let answer: DevicePollResult
            do {
                answer = try await client.pollDeviceToken(metadata, deviceCode: authorization.deviceCode)
            } catch {
                let (message, slower) = try pollFailed(error, provider: name, again: again)
                if slower { interval += 5 }
                failing = message
                continue
            }
            failing = nil
            switch answer {
            case .pending: continue
            case .slowDown: interval += 5
            case .tokens(let tokens):
                return try await completion.completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
            }
        }
    }

    /// A poll the provider did not answer: a refusal or an expired code ends the sign-in
    /// (thrown); a busy provider, or one that blinks, is asked again at the next interval
    /// (why it failed, and whether to ask 5 s slower from now on, as slow_down asks).
    private func pollFailed(_ error: OAuthError, provider name: String, again: String) throws(BrokerError) -> (message: String, slower: Bool) {
        switch error {
        case .provider(let code, _, _) where code == "access_denied":
            throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) was refused at the provider (access was declined there, or the account may not use this client): \(again) and allow access, or ask the provider's administrator")
        case .provider(let code, _, _) where code == "expired_token":
            throw BrokerError.loginFailed(provider: name, message: "the code for \(name) expired before it was approved: \(again)")
        case .provider:
            counters.providerErrors.increment()
            throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) failed: \(error.message)")
        case .busy:
            // Too many requests (RFC 8628 §3.5).
            counters.providerErrors.increment()
            logger.warning("device poll answered busy; polling on, 5 s slower", metadata: ["provider": "\(name)", "error": "\(error.message)"])
            return (error.message, true)
        case .unreachable, .invalidResponse, .configuration, .endpointNotFound:
            counters.providerErrors.increment()
            logger.warning("device poll failed; polling on", metadata: ["provider": "\(name)", "error": "\(error.message)"])
            return (error.message, false)
        }
    }

}
