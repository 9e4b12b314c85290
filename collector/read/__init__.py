"""The read side: answers to questions from stored figures (the services behind the API and
the commands) and the ``/metrics`` exposition. Reads never write."""
