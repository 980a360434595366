// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title BlockLuckyPOAP: one soulbound badge per player and round (POAP-style, ERC-721-like).
/// @notice Minted by an operator (the fleet's operator key) for each player who bought tickets in
/// a round. Badges cannot be transferred; the ERC-721 read surface and `Transfer` event are kept
/// so wallets and indexers see them as NFTs.
contract BlockLuckyPOAP {
    error BadgeAlreadyMinted(address player, uint256 roundId);
    error ZeroAddressNotAllowed();
    error NotOperator(address caller);
    error NotOwner(address caller);
    error NonexistentToken(uint256 tokenId);
    error Soulbound();

    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
    event BadgeMinted(address indexed player, uint256 indexed roundId, uint256 tokenId);
    event OperatorSet(address indexed operator, bool allowed);

    string public constant name = "BlockLucky POAP";
    string public constant symbol = "BLPOAP";

    address public immutable owner;
    mapping(address => bool) public isOperator;
    uint256 public totalSupply;
    mapping(uint256 => address) private _ownerOf;
    mapping(uint256 => uint256) public roundOf;
    mapping(address => uint256) private _balanceOf;
    mapping(address => mapping(uint256 => uint256)) private _badgeOf;

    constructor(address operator) {
        if (operator == address(0)) revert ZeroAddressNotAllowed();
        owner = msg.sender;
        isOperator[operator] = true;
        emit OperatorSet(operator, true);
    }

    function setOperator(address operator, bool allowed) external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        if (operator == address(0)) revert ZeroAddressNotAllowed();
        isOperator[operator] = allowed;
        emit OperatorSet(operator, allowed);
    }

    function mintBadge(address player, uint256 roundId) external returns (uint256 tokenId) {
        if (!isOperator[msg.sender]) revert NotOperator(msg.sender);
        if (player == address(0)) revert ZeroAddressNotAllowed();
        if (_badgeOf[player][roundId] != 0) revert BadgeAlreadyMinted(player, roundId);
        tokenId = ++totalSupply;
        _badgeOf[player][roundId] = tokenId;
        _ownerOf[tokenId] = player;
        roundOf[tokenId] = roundId;
        _balanceOf[player] += 1;
        emit Transfer(address(0), player, tokenId);
        emit BadgeMinted(player, roundId, tokenId);
    }

    function hasBadge(address player, uint256 roundId) external view returns (bool) {
        return _badgeOf[player][roundId] != 0;
    }

    function badgeOf(address player, uint256 roundId) external view returns (uint256) {
        return _badgeOf[player][roundId];
    }

    // -- ERC-721 read surface --

    function balanceOf(address holder) external view returns (uint256) {
        if (holder == address(0)) revert ZeroAddressNotAllowed();
        return _balanceOf[holder];
    }

    function ownerOf(uint256 tokenId) external view returns (address holder) {
        holder = _ownerOf[tokenId];
        if (holder == address(0)) revert NonexistentToken(tokenId);
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x01ffc9a7 || interfaceId == 0x80ac58cd; // ERC-165, ERC-721
    }

    function transferFrom(address, address, uint256) external pure {
        revert Soulbound();
    }

    function safeTransferFrom(address, address, uint256) external pure {
        revert Soulbound();
    }

    function approve(address, uint256) external pure {
        revert Soulbound();
    }
}
