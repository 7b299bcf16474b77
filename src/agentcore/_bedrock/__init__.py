"""AWS Bedrock (the ``bedrock`` extra): the Converse dialect and its signing.

- ``codec``: :class:`BedrockCodec` (Converse / ConverseStream requests and replies, the
  event-stream decoder).
- ``signing``: :class:`BedrockSigner` (credentials from the AWS chain, SigV4 by botocore).

Nothing here is imported by ``import agentcore``; ``bedrock://`` URLs load it on use.
"""
