// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {IRandomnessConsumer} from "./VRFCoordinatorLocal.sol";

interface IRandomnessCoordinator {
    function requestRandomness() external returns (uint256 requestId);
}

/// @title BlockLucky: a round-based lottery (reference contract for development and tests).
/// @notice Players buy tickets in the open round; once its end time has passed, the round is
/// drawn (enough players) or cancelled (too few). The winner claims the pot, the players of a
/// cancelled round claim a refund of what they paid. A new round opens after every draw or
/// cancellation. The fleet depends only on this ABI (events, views and custom errors).
contract BlockLucky is IRandomnessConsumer {
    enum Status {
        None,
        Open,
        Drawing,
        Completed,
        Cancelled
    }

    struct Round {
        Status status;
        uint64 endTime;
        uint32 minPlayers;
        uint32 players;
        uint128 ticketPrice;
        uint256 pot;
        uint256 tickets;
        uint256 requestId;
        address winner;
        bool prizeClaimed;
    }

    /// One purchase: tickets [previous end, end) belong to `player`.
    struct Range {
        address player;
        uint256 end;
    }

    // -- errors the fleet maps (issue 4) --
    error NotWinner(uint256 roundId, address caller);
    error PrizeAlreadyClaimed(uint256 roundId);
    error RoundNotCompleted(uint256 roundId);
    error NothingToRefund(uint256 roundId, address caller);
    error RoundNotCancelled(uint256 roundId);
    // -- other errors --
    error EnforcedPause();
    error ExpectedPause();
    error NotOwner(address caller);
    error NotCoordinator(address caller);
    error RoundClosed(uint256 roundId);
    error WrongPayment(uint256 expected, uint256 paid);
    error InvalidTicketCount(uint256 count);
    error DrawNotReady(uint256 roundId);
    error RoundNotExpired(uint256 roundId);
    error UnknownRequest(uint256 requestId);
    error TransferFailed(address to, uint256 amount);
    error InvalidConfig();

    event RoundOpened(uint256 indexed roundId, uint256 ticketPrice, uint64 endTime, uint32 minPlayers);
    event TicketsPurchased(uint256 indexed roundId, address indexed player, uint256 count, uint256 amount);
    event DrawRequested(uint256 indexed roundId, uint256 requestId);
    event WinnerPicked(uint256 indexed roundId, address indexed winner, uint256 prize);
    event RoundCancelled(uint256 indexed roundId);
    event PrizeClaimed(uint256 indexed roundId, address indexed winner, uint256 amount);
    event RefundClaimed(uint256 indexed roundId, address indexed payer, uint256 amount);
    event Paused(address account);
    event Unpaused(address account);

    uint256 public constant MAX_TICKETS_PER_PURCHASE = 100;

    address public immutable owner;
    IRandomnessCoordinator public immutable coordinator;

    uint128 public ticketPrice;
    uint64 public roundDuration;
    uint32 public minPlayers;
    bool public paused;

    uint256 public currentRoundId;
    mapping(uint256 => Round) private _rounds;
    mapping(uint256 => Range[]) private _ranges;
    mapping(uint256 => mapping(address => uint256)) public paidBy;
    mapping(uint256 => uint256) private _roundOfRequest;

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        _;
    }

    modifier whenNotPaused() {
        if (paused) revert EnforcedPause();
        _;
    }

    constructor(address coordinator_, uint128 ticketPrice_, uint64 roundDuration_, uint32 minPlayers_) {
        if (coordinator_ == address(0) || ticketPrice_ == 0 || roundDuration_ == 0 || minPlayers_ == 0) {
            revert InvalidConfig();
        }
        owner = msg.sender;
        coordinator = IRandomnessCoordinator(coordinator_);
        ticketPrice = ticketPrice_;
        roundDuration = roundDuration_;
        minPlayers = minPlayers_;
        _openRound();
    }

    // -- players --

    function buyTickets(uint256 count) external payable whenNotPaused {
        uint256 roundId = currentRoundId;
        Round storage r = _rounds[roundId];
        if (r.status != Status.Open || block.timestamp >= r.endTime) revert RoundClosed(roundId);
        if (count == 0 || count > MAX_TICKETS_PER_PURCHASE) revert InvalidTicketCount(count);
        uint256 expected = count * r.ticketPrice;
        if (msg.value != expected) revert WrongPayment(expected, msg.value);
        if (paidBy[roundId][msg.sender] == 0) r.players += 1;
        paidBy[roundId][msg.sender] += msg.value;
        r.pot += msg.value;
        r.tickets += count;
        _ranges[roundId].push(Range({player: msg.sender, end: r.tickets}));
        emit TicketsPurchased(roundId, msg.sender, count, msg.value);
    }

    function claimPrize(uint256 roundId) external {
        Round storage r = _rounds[roundId];
        if (r.status != Status.Completed) revert RoundNotCompleted(roundId);
        if (msg.sender != r.winner) revert NotWinner(roundId, msg.sender);
        if (r.prizeClaimed) revert PrizeAlreadyClaimed(roundId);
        r.prizeClaimed = true;
        uint256 amount = r.pot;
        emit PrizeClaimed(roundId, msg.sender, amount);
        _pay(msg.sender, amount);
    }

    function claimRefund(uint256 roundId) external {
        if (_rounds[roundId].status != Status.Cancelled) revert RoundNotCancelled(roundId);
        uint256 amount = paidBy[roundId][msg.sender];
        if (amount == 0) revert NothingToRefund(roundId, msg.sender);
        paidBy[roundId][msg.sender] = 0;
        emit RefundClaimed(roundId, msg.sender, amount);
        _pay(msg.sender, amount);
    }

    // -- keeper --

    function isDrawReady() public view returns (bool) {
        Round storage r = _rounds[currentRoundId];
        return !paused && r.status == Status.Open && block.timestamp >= r.endTime && r.players >= r.minPlayers;
    }

    function isExpiredWithoutDraw() public view returns (bool) {
        Round storage r = _rounds[currentRoundId];
        return !paused && r.status == Status.Open && block.timestamp >= r.endTime && r.players < r.minPlayers;
    }

    function requestDraw() external whenNotPaused {
        uint256 roundId = currentRoundId;
        if (!isDrawReady()) revert DrawNotReady(roundId);
        _rounds[roundId].status = Status.Drawing;
        uint256 requestId = coordinator.requestRandomness();
        // With a synchronous coordinator the round is already drawn here (and the next opened).
        if (_rounds[roundId].status == Status.Drawing) {
            _rounds[roundId].requestId = requestId;
            _roundOfRequest[requestId] = roundId + 1;
        }
        emit DrawRequested(roundId, requestId);
    }

    function fulfillRandomness(uint256 requestId, uint256 randomWord) external {
        if (msg.sender != address(coordinator)) revert NotCoordinator(msg.sender);
        uint256 roundId = currentRoundId;
        uint256 stored = _roundOfRequest[requestId];
        if (stored != 0) {
            roundId = stored - 1;
            delete _roundOfRequest[requestId];
        }
        Round storage r = _rounds[roundId];
        if (r.status != Status.Drawing) revert UnknownRequest(requestId);
        r.winner = _ticketOwner(roundId, randomWord % r.tickets);
        r.status = Status.Completed;
        emit WinnerPicked(roundId, r.winner, r.pot);
        _openRound();
    }

    function closeExpiredRound() external whenNotPaused {
        uint256 roundId = currentRoundId;
        if (!isExpiredWithoutDraw()) revert RoundNotExpired(roundId);
        _rounds[roundId].status = Status.Cancelled;
        emit RoundCancelled(roundId);
        _openRound();
    }

    // -- owner --

    function pause() external onlyOwner {
        if (paused) revert EnforcedPause();
        paused = true;
        emit Paused(msg.sender);
    }

    function unpause() external onlyOwner {
        if (!paused) revert ExpectedPause();
        paused = false;
        emit Unpaused(msg.sender);
    }

    /// Applies from the next round on.
    function setRoundConfig(uint128 ticketPrice_, uint64 roundDuration_, uint32 minPlayers_) external onlyOwner {
        if (ticketPrice_ == 0 || roundDuration_ == 0 || minPlayers_ == 0) revert InvalidConfig();
        ticketPrice = ticketPrice_;
        roundDuration = roundDuration_;
        minPlayers = minPlayers_;
    }

    // -- views --

    function getRound(uint256 roundId) external view returns (Round memory) {
        return _rounds[roundId];
    }

    function ticketsOf(uint256 roundId, address player) external view returns (uint256 count) {
        Range[] storage ranges = _ranges[roundId];
        uint256 start = 0;
        for (uint256 i = 0; i < ranges.length; i++) {
            if (ranges[i].player == player) count += ranges[i].end - start;
            start = ranges[i].end;
        }
    }

    // -- internals --

    function _openRound() private {
        uint256 roundId = ++currentRoundId;
        uint64 endTime = uint64(block.timestamp) + roundDuration;
        _rounds[roundId] = Round({
            status: Status.Open,
            endTime: endTime,
            minPlayers: minPlayers,
            players: 0,
            ticketPrice: ticketPrice,
            pot: 0,
            tickets: 0,
            requestId: 0,
            winner: address(0),
            prizeClaimed: false
        });
        emit RoundOpened(roundId, ticketPrice, endTime, minPlayers);
    }

    /// Binary search of the purchase that holds ticket `index`.
    function _ticketOwner(uint256 roundId, uint256 index) private view returns (address) {
        Range[] storage ranges = _ranges[roundId];
        uint256 lo = 0;
        uint256 hi = ranges.length - 1;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            if (ranges[mid].end > index) hi = mid;
            else lo = mid + 1;
        }
        return ranges[lo].player;
    }

    function _pay(address to, uint256 amount) private {
        (bool ok,) = payable(to).call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
