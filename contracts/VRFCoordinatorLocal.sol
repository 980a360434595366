// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @notice What a consumer of the coordinator implements.
interface IRandomnessConsumer {
    function fulfillRandomness(uint256 requestId, uint256 randomWord) external;
}

/// @title A local VRF-style coordinator (development and tests only).
/// @notice Production plugs a real VRF coordinator behind the same two-step shape: the consumer
/// asks for randomness and is called back later with a random word. Here the word comes from
/// block data, which a miner could influence: never deploy this to a public network.
/// With `autoFulfill` on (the default), the callback happens inside the request transaction, so a
/// single `requestDraw()` emits `WinnerPicked`; with it off, anyone calls `fulfill(requestId)`.
contract VRFCoordinatorLocal {
    error UnknownRequest(uint256 requestId);
    error NotOwner(address caller);

    event RandomnessRequested(uint256 indexed requestId, address indexed consumer);
    event RandomnessFulfilled(uint256 indexed requestId, uint256 randomWord);

    address public immutable owner;
    bool public autoFulfill = true;
    uint256 public nextRequestId = 1;
    mapping(uint256 => address) public consumerOf;

    constructor() {
        owner = msg.sender;
    }

    function setAutoFulfill(bool enabled) external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        autoFulfill = enabled;
    }

    function requestRandomness() external returns (uint256 requestId) {
        requestId = nextRequestId++;
        consumerOf[requestId] = msg.sender;
        emit RandomnessRequested(requestId, msg.sender);
        if (autoFulfill) {
            _fulfill(requestId);
        }
    }

    function fulfill(uint256 requestId) external {
        _fulfill(requestId);
    }

    function _fulfill(uint256 requestId) private {
        address consumer = consumerOf[requestId];
        if (consumer == address(0)) revert UnknownRequest(requestId);
        delete consumerOf[requestId];
        uint256 word = uint256(
            keccak256(abi.encode(blockhash(block.number - 1), block.prevrandao, requestId, consumer))
        );
        emit RandomnessFulfilled(requestId, word);
        IRandomnessConsumer(consumer).fulfillRandomness(requestId, word);
    }
}
