"""The Ethernet front end of netagg (docs/ethernet.md): GMII MACs, RGMII
DDR I/O, receive buffers, IPv4/UDP parsing into core beats, ARP/ICMP
replies, RESULT framing, and the two-port switch top around the core."""
