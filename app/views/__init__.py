"""The UI's pages (Ask, Explore, Load, Evaluate), each a `page()` for st.navigation."""
