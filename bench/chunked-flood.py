#!/usr/bin/env python3
"""Sends CONNECTIONS concurrent POSTs of BYTES bytes each, every byte its own chunk
(`Transfer-Encoding: chunked`), and prints how each was answered. For `make bench`'s
memory figure: what the ingress holds while bodies arrive one byte per frame.

usage: chunked-flood.py HOST PORT PATH CONNECTIONS BYTES
"""
import socket
import sys
import threading

host, port, path, connections, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
head = (f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        "transfer-encoding: chunked\r\n\r\n").encode()
body = b"1\r\nx\r\n" * size + b"0\r\n\r\n"
answers = []


def send():
    with socket.create_connection((host, port)) as stream:
        stream.sendall(head)
        stream.sendall(body)
        answer = stream.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
        answers.append(answer)


threads = [threading.Thread(target=send) for _ in range(connections)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(", ".join(sorted(set(answers))) or "no answer")
