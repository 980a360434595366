"""Sending one contract transaction safely: lock, journal, broadcast, wait, replace, reconcile.

For a request keyed by a job id, `TxSender.execute`:
1. takes the signer's lock, which orders its nonces across processes; it is held from the
   journal read to the broadcast only, so several transactions of one signer are in flight at
   once (pipelined: many per block), each awaited by its own job;
2. reconciles what an earlier delivery journaled: a receipt for any of its hashes ends the job
   without sending; a transaction still unmined (pending, or dropped by the node) is rebroadcast
   unchanged and awaited; a nonce consumed by something else clears the journal;
3. estimates gas (a revert here is decoded and returned: nothing is sent);
4. signs with the node's pending nonce and EIP-1559 fees under the cap, journals the signed
   transaction durably, and only then broadcasts it (a crash in between leaves a journaled
   transaction that step 2 rebroadcasts byte for byte: same hash, never a second one);
5. waits for the receipt, replacing an unmined transaction every `replace_after_s` with the same
   nonce and bumped fees (every hash is journaled; whichever is mined wins), up to
   `receipt_timeout_s`, after which the job retries and step 2 picks it up;
6. settles only once the receipt's block is `confirmations` deep (`INDEXER_CONFIRMATIONS`, the
   depth the indexer trusts): a transaction a reorg takes out meanwhile is broadcast again (the
   same signed bytes: never a second transaction) and awaited anew;
7. decodes a reverted receipt into its custom error by replaying the call at the receipt's block.

Under the lock, the journal row is read again first: a delivery that began before another one
settled the same key (a second keeper, a redelivery) returns the recorded outcome instead of
sending, or of overwriting a CONFIRMED row with the outcome of a failing preflight. A request's
`before_send` (the job's cancel check) runs right before anything is signed: a cancel that
arrived while the job waited for the lock stops it with nothing sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from shared.errors import RetryLater

from .abi import Revert, decode_revert
from .client import ChainClient
from .errors import CallReverted, ChainError, FeeCapExceeded, RpcError, TxNotMined, Underpriced
from .fees import GWEI, Fees, initial_fees, repriced
from .journal import Broadcast, InFlight
from .lock import SignerLocks

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from .settings import ChainSettings

log = structlog.get_logger("jobfleet.chain.tx")

#: Node answers to a broadcast that mean "already have it" rather than a rejection (a
#: "replacement transaction underpriced": the pool holds a later, higher-priced one of ours).
_BENIGN = (
    "already known",
    "known transaction",
    "already imported",
    "nonce too low",
    "replacement transaction underpriced",
)
#: Node answers that refuse the fees (geth and anvil: "max fee per gas less than block base
#: fee", code -32003; a pool's minimum: "transaction underpriced"; Nethermind: "FeeTooLow"):
#: the transaction is re-priced from the market, never an attempt spent.
_UNDERPRICED = (
    "less than block base fee",
    "transaction underpriced",
    "feetoolow",
    "fee too low",
    "max fee per gas less than",
)
#: When a job handed back while its transaction is mined comes back to look again.
RECHECK_MS = 1_000
#: When an action whose fees the node refused (at the cap) comes back.
UNDERPRICED_RETRY_MS = 5_000
#: How often an awaited transaction that has no receipt is looked for in the node's pool.
POOL_CHECK_S = 2.0
#: Gas limit when estimation is skipped (a call sent despite its preflight revert, in tests).
FALLBACK_GAS = 300_000


class NonceConsumed(ChainError):
    """The journaled nonce was used by a transaction this journal does not know; sent again."""

    code = "NONCE_CONSUMED"


class Journal(Protocol):
    def settled(self, job_id: str) -> tuple[str, str | None] | None: ...
    def in_flight(self, job_id: str) -> InFlight | None: ...
    def record_broadcast(self, job_id: str, signer: str, broadcast: Broadcast) -> None: ...
    def forget_in_flight(self, job_id: str) -> None: ...


@dataclass(frozen=True)
class TxPolicy:
    receipt_timeout_s: float = 120.0
    replace_after_s: float = 30.0
    fee_bump_percent: int = 25
    max_fee: int = 300 * GWEI
    priority_fee: int = 1 * GWEI
    gas_margin_percent: int = 20
    poll_max_s: float = 0.5
    #: Blocks on top of the receipt's before it counts (0: the receipt settles at once).
    confirmations: int = 0

    @classmethod
    def from_settings(cls, settings: ChainSettings) -> TxPolicy:
        return cls(
            receipt_timeout_s=settings.receipt_timeout_s,
            replace_after_s=settings.replace_after_s,
            fee_bump_percent=settings.fee_bump_percent,
            max_fee=int(settings.max_fee_gwei * GWEI),
            priority_fee=int(settings.priority_fee_gwei * GWEI),
            gas_margin_percent=settings.gas_limit_margin_percent,
            confirmations=settings.confirmations,
        )


@dataclass(frozen=True)
class TxRequest:
    key: str  # journal key (the job id)
    to: str
    data: bytes
    value: int = 0
    #: Called right before signing a new transaction; raising stops the send (a cancel check).
    before_send: Callable[[], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TxOutcome:
    """`confirmed`, or `revert` set (with `tx_hash` None when the preflight reverted)."""

    confirmed: bool
    revert: Revert | None = None
    tx_hash: str | None = None
    nonce: int | None = None
    gas_used: int | None = None
    block_number: int | None = None
    #: Settled from an earlier delivery's journaled transaction (nothing sent this time).
    reconciled: bool = False
    broadcasts: int = 0
    #: The journal row was already final under the lock (its status): nothing was sent.
    recorded: str | None = None


class AwaitingReceipt(RetryLater):
    """Broadcast and journaled, not settled yet: the job comes back to look again (no attempt
    spent), and the worker's thread serves other actions meanwhile."""

    code = "AWAITING_RECEIPT"


class TxSender:
    def __init__(
        self,
        client: ChainClient,
        locks: SignerLocks,
        journal: Journal,
        policy: TxPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.locks = locks
        self.journal = journal
        self.policy = policy
        self._clock = clock
        self._sleep = sleep

    def execute(
        self,
        account: LocalAccount,
        req: TxRequest,
        *,
        preflight: bool = True,
        wait_s: float | None = None,
    ) -> TxOutcome:
        """Send (or find again) the request's transaction and await it. `wait_s`: the longest
        this call waits for the receipt and its confirmations before handing the job back
        (`AwaitingReceipt`: a later delivery looks again, without the signer's lock while its
        transaction is mined or pending); None: up to the receipt timeout."""
        if wait_s is not None:
            prior = self.journal.in_flight(req.key)
            if prior is not None and prior.signer.lower() == account.address.lower():
                awaited = _journaled(prior)
                latest = awaited[-1].tx_hash
                if self._first_receipt(awaited) is not None or self.client.transaction(latest):
                    return self._await(
                        account, req, awaited, reconciled=True, since_s=prior.age_s, wait_s=wait_s
                    )
        since_s = 0.0
        with self.locks.hold(account.address):
            final = self.journal.settled(req.key)
            if final is not None:
                status, tx_hash = final
                log.info("tx.already_settled", key=req.key, status=status, tx_hash=tx_hash)
                return TxOutcome(confirmed=False, tx_hash=tx_hash, reconciled=True, recorded=status)
            prior = self.journal.in_flight(req.key)
            sent = self._reconcile(account, req, prior) if prior is not None else None
            reconciled = sent is not None
            if prior is not None and sent is not None:
                since_s = prior.age_s
            if sent is None:
                call = {"from": account.address, "to": req.to, "data": req.data, "value": req.value}
                try:
                    gas = self.client.estimate_gas(call)
                except CallReverted as exc:
                    if preflight:
                        return TxOutcome(confirmed=False, revert=decode_revert(exc.data))
                    gas = FALLBACK_GAS
                gas = gas * (100 + self.policy.gas_margin_percent) // 100
                if req.before_send is not None:
                    req.before_send()
                sent = [self._send_new(account, req, gas)]
        # The lock only orders nonces: with this transaction journaled and broadcast, the
        # signer's next one can go while this one is mined (several in flight per signer).
        return self._await(
            account, req, sent, reconciled=reconciled, since_s=since_s, wait_s=wait_s
        )

    def _send_new(self, account: LocalAccount, req: TxRequest, gas: int) -> Broadcast:
        """Under the signer lock: the node's pending nonce (it counts the signer's transactions
        in flight, so a nonce rejected or never broadcast is handed out again: no gap), signed,
        journaled durably, broadcast."""
        nonce = self.client.nonce(account.address, "pending")
        first = self._sign(account, req, nonce, gas, self._market())
        self.journal.record_broadcast(req.key, account.address, first)
        try:
            self._broadcast(req, first)
        except Underpriced:
            # The base fee moved between the price and the broadcast: priced again at once.
            try:
                first = self._reprice(account, req, [first], reason="refused by the node")
            except Underpriced:
                self.journal.forget_in_flight(req.key)  # every broadcast refused: none in flight
                raise
        log.info(
            "tx.broadcast", key=req.key, signer=account.address, nonce=nonce, tx_hash=first.tx_hash
        )
        return first

    def _market(self) -> Fees:
        """Fees from the market: twice the next block's base fee plus the tip, under the cap
        (`FeeCapExceeded`, retried later without an attempt, when even base + tip is above)."""
        return initial_fees(
            self.client.next_base_fee(),
            priority_fee=self.policy.priority_fee,
            cap=self.policy.max_fee,
        )

    def _reprice(
        self, account: LocalAccount, req: TxRequest, sent: list[Broadcast], *, reason: str,
        event: str = "tx.repriced",
    ) -> Broadcast:  # fmt: skip
        """A replacement of the latest transaction (same nonce) priced from the market, at least
        the old fees bumped by `fee_bump_percent`; journaled, then broadcast. `Underpriced`
        (retried later, no attempt) when that does not fit under the cap or is refused too."""
        latest = sent[-1]
        old = Fees(latest.max_fee, latest.priority_fee)
        try:
            market = self._market()
        except FeeCapExceeded:
            market = old  # the market is above the cap: the bump alone, if it fits
        fees = repriced(old, market, percent=self.policy.fee_bump_percent, cap=self.policy.max_fee)
        if fees is None:
            raise Underpriced(
                f"{latest.tx_hash} (nonce {latest.nonce}) {reason}; its fees are at the cap"
                f" ({self.policy.max_fee / GWEI:.3f} gwei)",
                delay_ms=UNDERPRICED_RETRY_MS,
            )
        replacement = self._sign(account, req, latest.nonce, latest.gas, fees)
        self.journal.record_broadcast(req.key, account.address, replacement)
        self._broadcast(req, replacement)
        log.info(
            event,
            key=req.key,
            nonce=latest.nonce,
            replaces=latest.tx_hash,
            tx_hash=replacement.tx_hash,
            reason=reason,
            max_fee_gwei=round(fees.max_fee / GWEI, 3),
        )
        return replacement

    def _rebroadcast(self, account: LocalAccount, req: TxRequest, sent: list[Broadcast]) -> None:
        """The same signed transaction again; re-priced when the node refuses its fees now."""
        try:
            self._broadcast(req, sent[-1])
        except Underpriced:
            sent.append(self._reprice(account, req, sent, reason="refused by the node"))

    # -- steps --

    def _reconcile(
        self, account: LocalAccount, req: TxRequest, prior: InFlight
    ) -> list[Broadcast] | None:
        """What an earlier delivery journaled, to await again; None: nothing of ours in flight."""
        if prior.signer.lower() != account.address.lower():
            self.journal.forget_in_flight(req.key)
            return None
        sent = _journaled(prior)
        latest = sent[-1]
        mined = self._first_receipt(prior.broadcasts)
        if mined is not None:  # awaited to its confirmations like a fresh one
            log.info("tx.reconciled", key=req.key, tx_hash=mined[0].tx_hash, outcome="mined")
            return sent
        if self.client.nonce(account.address, "latest") > prior.nonce:
            if self._first_receipt(prior.broadcasts) is not None:  # a block landed in between
                return sent
            log.warning("tx.nonce_consumed", key=req.key, nonce=prior.nonce)
            self.journal.forget_in_flight(req.key)
            return None
        log.info(
            "tx.reconciled", key=req.key, tx_hash=latest.tx_hash, outcome="unmined, rebroadcast"
        )
        self._rebroadcast(account, req, sent)
        return sent

    def _await(
        self,
        account: LocalAccount,
        req: TxRequest,
        sent: list[Broadcast],
        *,
        reconciled: bool,
        since_s: float = 0.0,
        wait_s: float | None = None,
    ) -> TxOutcome:
        """`since_s`: how long ago the latest broadcast was journaled (a later delivery replaces
        it on time); `wait_s`: hand the job back after this long (`AwaitingReceipt`)."""
        start = self._clock()
        deadline = start + self.policy.receipt_timeout_s
        replace_at = start + max(0.0, self.policy.replace_after_s - since_s)
        hand_back_at = start + wait_s if wait_s is not None else None
        pause = 0.01
        seen: str | None = None  # the hash we last saw mined, until it is deep enough
        # A delivery that comes back to an earlier broadcast looks at the pool and the price at
        # once: it may hand the job back before a 2 s check would come.
        pool_check_at = start + (0.0 if since_s > 0 else POOL_CHECK_S)
        while True:
            mined = self._first_receipt(sent)
            if mined is not None:
                seen = mined[0].tx_hash
                block = int(mined[1]["blockNumber"], 16)
                depth = self.client.block_number() - block if self.policy.confirmations else 0
                if depth >= self.policy.confirmations:
                    return self._settle(
                        account, req, mined[0], mined[1], reconciled=reconciled, count=len(sent)
                    )
            elif seen is not None:
                # Mined, then taken out by a reorg before it was deep enough: its nonce is free
                # again. Put the same signed transaction back (one transaction, never two).
                log.warning("tx.reorged_out", key=req.key, tx_hash=seen, nonce=sent[-1].nonce)
                seen = None
                if self.client.nonce(account.address, "latest") > sent[-1].nonce:
                    self.journal.forget_in_flight(req.key)
                    raise NonceConsumed(
                        f"nonce {sent[-1].nonce} of {account.address} used by another"
                        " transaction after a reorg"
                    )
                self._rebroadcast(account, req, sent)
                replace_at = self._clock() + self.policy.replace_after_s
            now = self._clock()
            if mined is None and now >= pool_check_at:
                pool_check_at = now + POOL_CHECK_S
                self._back_in_pool(account, req, sent)
                if sent[-1].max_fee < self.client.next_base_fee():
                    # Below the next block's base fee (a spike): it cannot be mined, and the
                    # signer's later nonces wait behind it. Re-priced from the market now, once,
                    # rather than bumped by 25 % every replacement interval.
                    sent.append(self._reprice(account, req, sent, reason="below the base fee"))
                    replace_at = now + self.policy.replace_after_s
            if hand_back_at is not None and now >= hand_back_at:
                state = "not final" if mined is not None else "unmined"
                raise AwaitingReceipt(
                    f"{sent[-1].tx_hash} (nonce {sent[-1].nonce}) {state}: looked at again later",
                    delay_ms=RECHECK_MS,
                )
            if now >= deadline:
                state = "not final" if mined is not None else "unmined"
                raise TxNotMined(
                    f"{sent[-1].tx_hash} (nonce {sent[-1].nonce}, {len(sent)} broadcasts)"
                    f" {state} after {self.policy.receipt_timeout_s:.0f}s"
                )
            if mined is None and now >= replace_at:
                sent.append(self._replace(account, req, sent))
                replace_at = now + self.policy.replace_after_s
            self._sleep(pause)
            pause = min(pause * 2, self.policy.poll_max_s)

    def _back_in_pool(self, account: LocalAccount, req: TxRequest, sent: list[Broadcast]) -> None:
        """Neither mined nor known to the node (dropped from its pool, or taken out by a reorg
        between two polls): put the same signed transaction back now rather than at the next
        replacement; its later nonces wait on it."""
        latest = sent[-1]
        if self.client.transaction(latest.tx_hash) is not None:
            return
        if self.client.nonce(account.address, "latest") > latest.nonce:
            if self._first_receipt(sent) is None:
                self.journal.forget_in_flight(req.key)
                raise NonceConsumed(
                    f"nonce {latest.nonce} of {account.address} used by another transaction"
                )
            return  # mined between two polls: the next poll settles it
        log.warning("tx.rebroadcast", key=req.key, tx_hash=latest.tx_hash, reason="not in pool")
        self._rebroadcast(account, req, sent)

    def _replace(self, account: LocalAccount, req: TxRequest, sent: list[Broadcast]) -> Broadcast:
        latest = sent[-1]
        if self.client.nonce(account.address, "latest") > latest.nonce:
            mined = self._first_receipt(sent)
            if mined is None:
                self.journal.forget_in_flight(req.key)
                raise NonceConsumed(
                    f"nonce {latest.nonce} of {account.address} used by another transaction"
                )
            return latest  # mined between two polls: the next poll settles it
        try:
            return self._reprice(
                account, req, sent, reason="unmined after the replacement interval",
                event="tx.replaced",
            )  # fmt: skip
        except Underpriced:
            # At the cap: put the same transaction back in case the node dropped it.
            log.warning("tx.fee_cap_reached", key=req.key, tx_hash=latest.tx_hash)
            self._broadcast(req, latest)
            return latest

    def _broadcast(self, req: TxRequest, broadcast: Broadcast) -> None:
        if not broadcast.raw:
            return
        try:
            self.client.send_raw(broadcast.raw)
        except RpcError as exc:
            message = exc.rpc_message.lower()
            if any(marker in message for marker in _BENIGN):
                return
            if any(marker in message for marker in _UNDERPRICED):
                # The fees, not the transaction: the caller prices it again (nothing forgotten:
                # an earlier broadcast of this nonce may be in the pool).
                raise Underpriced(
                    f"{broadcast.tx_hash}: {exc.rpc_message} (code {exc.rpc_code})",
                    delay_ms=UNDERPRICED_RETRY_MS,
                ) from None
            # Rejected outright (funds, gas, malformed): nothing of ours is in flight.
            self.journal.forget_in_flight(req.key)
            raise

    def _first_receipt(
        self, sent: list[Broadcast] | tuple[Broadcast, ...]
    ) -> tuple[Broadcast, dict[str, Any]] | None:
        for broadcast in reversed(sent):
            receipt = self.client.receipt(broadcast.tx_hash)
            if receipt is not None and receipt.get("blockNumber"):
                return broadcast, receipt
        return None

    def _settle(
        self,
        account: LocalAccount,
        req: TxRequest,
        broadcast: Broadcast,
        receipt: dict[str, Any],
        *,
        reconciled: bool,
        count: int,
    ) -> TxOutcome:
        block = int(receipt["blockNumber"], 16)
        revert = None if int(receipt["status"], 16) == 1 else self._replay(account, req, block)
        return TxOutcome(
            confirmed=revert is None,
            revert=revert,
            tx_hash=broadcast.tx_hash,
            nonce=broadcast.nonce,
            gas_used=int(receipt["gasUsed"], 16),
            block_number=block,
            reconciled=reconciled,
            broadcasts=count,
        )

    def _replay(self, account: LocalAccount, req: TxRequest, block: int) -> Revert:
        """The reverted transaction's error: its call replayed on the state of its block."""
        try:
            self.client.call(
                {"from": account.address, "to": req.to, "data": req.data, "value": req.value}, block
            )
        except CallReverted as exc:
            return decode_revert(exc.data)
        return Revert("UNKNOWN_REVERT")

    def _sign(
        self, account: LocalAccount, req: TxRequest, nonce: int, gas: int, fees: Fees
    ) -> Broadcast:
        tx: dict[str, Any] = {
            "type": 2,
            "chainId": self.client.chain_id(),
            "nonce": nonce,
            "to": req.to,
            "value": req.value,
            "data": req.data,
            "gas": gas,
            **fees.as_tx_fields(),
        }
        signed = account.sign_transaction(tx)
        return Broadcast(
            tx_hash="0x" + bytes(signed.hash).hex(),
            nonce=nonce,
            max_fee=fees.max_fee,
            priority_fee=fees.priority_fee,
            gas=gas,
            raw=bytes(signed.raw_transaction),
        )


def _journaled(prior: InFlight) -> list[Broadcast]:
    """The journaled broadcasts of the nonce, the latest with its signed bytes."""
    latest = Broadcast(
        prior.latest.tx_hash,
        prior.nonce,
        prior.latest.max_fee,
        prior.latest.priority_fee,
        prior.latest.gas,
        prior.raw,
    )
    return [*prior.broadcasts[:-1], latest]
